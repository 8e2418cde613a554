// The one import point of the event vocabulary for the UI.
//
// The vocabulary is defined in Rust (crates/mf-agent/src/events.rs) and its
// TypeScript types are generated into ./generated/events.ts by mf-agent's test
// `typescript_types_are_current`. Until that file is committed this module
// mirrors the Rust shapes as serde serialises them (in ts-rs's style). When
// the generated file lands, replace the mirror below with
//   export * from './generated/events';
// and let svelte-check point at whatever no longer matches. Never keep a
// hand-written copy beside a generated one.

/** Tokens per zone against the budget, measured by the backend. */
export type Gauge = {
  pinned: number;
  compressible: number;
  recent: number;
  /** `C − G − prompt_tokens` (0 when over). */
  free: number;
  /** The compaction threshold `⌊ratio · (C − G)⌋`. */
  threshold: number;
  /** Exact tokens of the whole rendered prompt. */
  prompt_tokens: number;
  /** Context size `C`. */
  context: number;
  /** Generation reserve `G`. */
  reserve: number;
  /** Messages in the history. */
  messages: number;
};

/** KV figures of one generation. */
export type KvFigures = {
  prompt_tokens: number;
  reused: number;
  decoded: number;
  trimmed: number;
  full_clear: boolean;
  prefill_ms: number;
  decode_ms: number;
};

export type Purpose = 'round' | 'summary' | 'probe' | 'answer';

/** Why the loop stopped. */
export type ExitReason =
  | { kind: 'final_answer' }
  | { kind: 'repeated_tool_call'; name: string; arguments: string }
  | { kind: 'consecutive_errors'; count: number }
  | { kind: 'context_exhausted'; tokens: number; threshold: number; messages: number }
  | { kind: 'compaction_ineffective'; freed_fraction: number }
  | { kind: 'compaction_loop'; compactions: number }
  | { kind: 'safety_cap'; rounds: number }
  | { kind: 'cancelled' };

/** One message of a compaction plan. */
export type PlanRow = {
  id: string;
  kind: string;
  zone: string;
  tier: string;
  tokens: number;
  influence: number | null;
  delta: number | null;
  chain: string | null;
  reason: string;
};

export type SummaryBy = 'none' | 'model' | 'fallback';

/** One thing that happened. */
export type AgentEvent =
  | {
      type: 'started';
      question: string;
      strategy: string;
      model: string;
      context: number;
      reserve: number;
      threshold: number;
      tools: Array<string>;
      resumed: boolean;
    }
  | { type: 'round'; round: number }
  | { type: 'token'; text: string }
  | { type: 'thinking_token'; text: string }
  | { type: 'tool_call'; call_id: string; name: string; arguments: unknown }
  | { type: 'approval_requested'; call_id: string; name: string; arguments: string; args_sha256: string }
  | { type: 'approval_decided'; call_id: string; approved: boolean; by: string }
  | {
      type: 'tool_result';
      call_id: string;
      name: string;
      ok: boolean;
      error: string | null;
      content: string;
      truncated: string | null;
    }
  | { type: 'tool_interrupted'; call_id: string; name: string }
  | { type: 'gauge'; gauge: Gauge }
  | {
      type: 'compaction_started';
      round: number;
      strategy: string;
      tokens_before: number;
      messages_before: number;
      class: string | null;
      rows: Array<PlanRow>;
      plan: unknown;
    }
  | {
      type: 'compaction_finished';
      round: number;
      tokens_before: number;
      tokens_after: number;
      messages_before: number;
      messages_after: number;
      summary_by: SummaryBy;
      fallback_reason: string | null;
      summary: string | null;
      appended_to_live_cache: boolean;
      verbatim: Array<string>;
      summarised: Array<string>;
      masked: Array<string>;
      dropped: Array<string>;
      notes: Array<string>;
      report: unknown;
    }
  | { type: 'compaction_failed'; round: number; message: string }
  | { type: 'kv'; round: number; purpose: Purpose; stats: KvFigures; completion_tokens: number }
  | { type: 'exit'; reason: ExitReason; rounds: number; compactions: number }
  | { type: 'final_answer'; text: string }
  | { type: 'error'; message: string };

/** The `type` tag of every event. */
export type AgentEventType = AgentEvent['type'];
