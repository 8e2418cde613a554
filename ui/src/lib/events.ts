// The one import point of the event vocabulary for the UI.
//
// The vocabulary is defined in Rust (crates/mf-agent/src/events.rs) and its
// TypeScript types are to be generated into ./generated/events.ts. Until that
// file exists this module mirrors the Rust shapes as serde serialises them
// (`#[serde(tag = "type", rename_all = "snake_case")]`). When the generated
// file lands, replace everything below with
//   export * from './generated/events';
// and let svelte-check point at whatever no longer matches. Never keep a
// hand-written copy beside a generated one.

/** KV figures of one generation (mf-inference `KvStats`). */
export interface KvStats {
  prompt_tokens: number;
  reused: number;
  decoded: number;
  trimmed: number;
  full_clear: boolean;
  prefill_ms: number;
  decode_ms: number;
}

/** Tokens per zone against the budget, measured by the backend. */
export interface Gauge {
  pinned: number;
  compressible: number;
  recent: number;
  /** `C − G − total` (0 when over). */
  free: number;
  /** The compaction threshold `ratio · (C − G)`. */
  threshold: number;
  /** Context size `C`. */
  context: number;
  /** Generation reserve `G`. */
  reserve: number;
}

/** Why the loop stopped. */
export type ExitReason =
  | { kind: 'final_answer' }
  | { kind: 'repeated_tool_call'; name: string }
  | { kind: 'consecutive_failures'; count: number }
  | { kind: 'context_exhausted'; tokens: number; threshold: number }
  | { kind: 'compaction_loop' }
  | { kind: 'safety_cap'; rounds: number };

/** JSON value of tool arguments. */
export type JsonValue = null | boolean | number | string | JsonValue[] | { [key: string]: JsonValue };

/** One thing that happened. */
export type AgentEvent =
  | { type: 'started'; question: string; strategy: string; model: string; context: number; reserve: number; threshold: number }
  | { type: 'round'; round: number }
  | { type: 'token'; text: string }
  | { type: 'thinking_token'; text: string }
  | { type: 'tool_call'; call_id: string; name: string; arguments: JsonValue }
  | { type: 'approval_requested'; call_id: string; name: string; arguments_hash: string }
  | { type: 'approval_decided'; call_id: string; approved: boolean; by: string }
  | { type: 'tool_result'; call_id: string; name: string; ok: boolean; content: string; truncated: string | null }
  | { type: 'tool_interrupted'; call_id: string; name: string }
  | ({ type: 'gauge' } & Gauge)
  | { type: 'compaction_started'; round: number; tokens_before: number; messages_before: number; compressible: number }
  | {
      type: 'compaction_finished';
      round: number;
      tokens_before: number;
      tokens_after: number;
      messages_before: number;
      messages_after: number;
      summarised_by_model: boolean;
      fallback_reason: string | null;
      summary: string;
      appended_to_live_cache: boolean;
    }
  | { type: 'kv'; round: number; stats: KvStats; completion_tokens: number }
  | { type: 'exit'; reason: ExitReason; rounds: number }
  | { type: 'final_answer'; text: string }
  | { type: 'error'; message: string };

/** One stored investigation (mf-agent `InvestigationRow`). */
export interface InvestigationRow {
  id: number;
  question: string;
  /** `running`, `finished`, `interrupted`, `failed`. */
  status: string;
  exit_reason: string | null;
  /** Unix seconds. */
  created: number;
  events: number;
}
