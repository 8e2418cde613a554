// Folds the agent's events into what the investigation view shows. It only
// files events where they belong: every number it holds came in an event.

import type { AgentEvent, ExitReason, Forecast, Gauge, KvFigures, PlanRow, Purpose } from './events';

export interface ToolCallView {
  call_id: string;
  name: string;
  arguments: unknown;
  /** Set when the loop asked for a decision (or a policy decided). */
  approval: {
    /** Canonical JSON of the arguments, as the user approves them. */
    arguments: string;
    /** The hash the decision is bound to. */
    args_sha256: string;
    /**
     * The backend's one-line account of what leaves ("POST host · N bytes ·
     * first lines"), shown before the full arguments; null when the event
     * has none (events stored before it was added).
     */
    summary: string | null;
    /** For `http`: the host the backend lets the user approve for the session. */
    host: string | null;
    /** For a tool from an MCP server: its server and tool, whose answer the user may give for good. */
    mcp: { server: string; tool: string } | null;
    decided: { approved: boolean; by: string } | null;
  } | null;
  result: { ok: boolean; error: string | null; content: string; truncated: string | null } | null;
  /** A call from a killed process that never got its result. */
  interrupted: boolean;
}

export type RoundItem =
  | { kind: 'thinking'; text: string }
  | { kind: 'text'; text: string }
  | { kind: 'tool'; call: ToolCallView }
  | { kind: 'compaction'; round: number }
  | { kind: 'pin'; pin: PinEvent }
  | { kind: 'error'; message: string };

export interface RoundView {
  /** 1-based; 0 holds what came before the first round. */
  round: number;
  items: RoundItem[];
}

export interface KvEntry {
  round: number;
  purpose: Purpose;
  stats: KvFigures;
  completion_tokens: number;
}

export type CompactionStarted = Extract<AgentEvent, { type: 'compaction_started' }>;
export type CompactionFinished = Extract<AgentEvent, { type: 'compaction_finished' }>;

export interface CompactionView {
  round: number;
  /** How many gauges had arrived when it finished: the chart draws its drop before sample `at`. */
  at: number | null;
  started: CompactionStarted | null;
  finished: CompactionFinished | null;
  /** Set when the compaction could not restore the budget. */
  failed: string | null;
}

/** One `gauge` event, with the round it arrived in: a column of the context chart. */
export interface ContextSample {
  /** The round of the last `round` event before it (0: before the first). */
  round: number;
  gauge: Gauge;
}

export type KvRestore = Extract<AgentEvent, { type: 'kv_restore' }>;

/** The user pinned (or unpinned) a message between rounds. */
export type PinEvent = Extract<AgentEvent, { type: 'pin' }>;

export interface InvestigationState {
  started: Extract<AgentEvent, { type: 'started' }> | null;
  rounds: RoundView[];
  /** The latest gauge. */
  gauge: Gauge | null;
  /** The agent's forecast of the next compaction, with the latest gauge (null: unknown). */
  forecast: Forecast | null;
  /** Every gauge, in order: the context over rounds. */
  samples: ContextSample[];
  /** The latest KV-cache restore (on resume): whether the saved cache was loaded. */
  kvRestore: KvRestore | null;
  kv: KvEntry[];
  compactions: CompactionView[];
  /** Every pin and unpin, in order: ledger entries beside the compactions. */
  pins: PinEvent[];
  exit: { reason: ExitReason; rounds: number; compactions: number } | null;
  finalAnswer: string | null;
  /** How many events were folded in. */
  events: number;
}

export function emptyState(): InvestigationState {
  return {
    started: null,
    rounds: [],
    gauge: null,
    forecast: null,
    samples: [],
    kvRestore: null,
    kv: [],
    compactions: [],
    pins: [],
    exit: null,
    finalAnswer: null,
    events: 0,
  };
}

function currentRound(s: InvestigationState): RoundView {
  let r = s.rounds[s.rounds.length - 1];
  if (!r) {
    r = { round: 0, items: [] };
    s.rounds.push(r);
  }
  return r;
}

function appendText(s: InvestigationState, kind: 'thinking' | 'text', text: string): void {
  const r = currentRound(s);
  const last = r.items[r.items.length - 1];
  if (last && last.kind === kind) last.text += text;
  else r.items.push({ kind, text });
}

function lastRound(s: InvestigationState): number {
  return s.rounds[s.rounds.length - 1]?.round ?? 0;
}

/** Finds a tool call by id, newest first (ids are unique per investigation). */
export function findCall(s: InvestigationState, callId: string): ToolCallView | null {
  for (let i = s.rounds.length - 1; i >= 0; i--) {
    const items = s.rounds[i]?.items ?? [];
    for (let j = items.length - 1; j >= 0; j--) {
      const it = items[j];
      if (it && it.kind === 'tool' && it.call.call_id === callId) return it.call;
    }
  }
  return null;
}

function compactionFor(s: InvestigationState, round: number): CompactionView {
  const last = s.compactions[s.compactions.length - 1];
  if (last && last.round === round && !last.finished && !last.failed) return last;
  const c: CompactionView = { round, at: null, started: null, finished: null, failed: null };
  s.compactions.push(c);
  currentRound(s).items.push({ kind: 'compaction', round });
  return c;
}

/** Folds one event into the state (in place, so a Svelte `$state` proxy tracks it). */
export function applyEvent(s: InvestigationState, e: AgentEvent): void {
  s.events += 1;
  switch (e.type) {
    case 'started':
      s.started = e;
      break;
    case 'round':
      s.rounds.push({ round: e.round, items: [] });
      break;
    case 'token':
      appendText(s, 'text', e.text);
      break;
    case 'thinking_token':
      appendText(s, 'thinking', e.text);
      break;
    case 'tool_call':
      currentRound(s).items.push({
        kind: 'tool',
        call: { call_id: e.call_id, name: e.name, arguments: e.arguments, approval: null, result: null, interrupted: false },
      });
      break;
    case 'approval_requested': {
      const c = findCall(s, e.call_id);
      // Events stored before `summary` existed have none (an empty line means none too).
      if (c) c.approval = { arguments: e.arguments, args_sha256: e.args_sha256, summary: e.summary || null, host: e.host ?? null, mcp: e.mcp ?? null, decided: null };
      break;
    }
    case 'approval_decided': {
      const c = findCall(s, e.call_id);
      if (c) {
        // A policy decision arrives without a request: record it all the same.
        if (!c.approval) c.approval = { arguments: '', args_sha256: '', summary: null, host: null, mcp: null, decided: null };
        c.approval.decided = { approved: e.approved, by: e.by };
      }
      break;
    }
    case 'tool_result': {
      const c = findCall(s, e.call_id);
      const result = { ok: e.ok, error: e.error, content: e.content, truncated: e.truncated };
      if (c) c.result = result;
      else
        currentRound(s).items.push({
          kind: 'tool',
          call: { call_id: e.call_id, name: e.name, arguments: null, approval: null, result, interrupted: false },
        });
      break;
    }
    case 'tool_interrupted': {
      const c = findCall(s, e.call_id);
      if (c) c.interrupted = true;
      else
        currentRound(s).items.push({
          kind: 'tool',
          call: { call_id: e.call_id, name: e.name, arguments: null, approval: null, result: null, interrupted: true },
        });
      break;
    }
    case 'gauge':
      s.gauge = e.gauge;
      s.forecast = e.forecast ?? null;
      s.samples.push({ round: lastRound(s), gauge: e.gauge });
      break;
    case 'kv_restore':
      s.kvRestore = e;
      break;
    case 'compaction_started':
      compactionFor(s, e.round).started = e;
      break;
    case 'compaction_finished': {
      const c = compactionFor(s, e.round);
      c.finished = e;
      c.at = s.samples.length;
      break;
    }
    case 'pin':
      s.pins.push(e);
      currentRound(s).items.push({ kind: 'pin', pin: e });
      break;
    case 'compaction_failed':
      compactionFor(s, e.round).failed = e.message;
      break;
    case 'kv':
      s.kv.push({ round: e.round, purpose: e.purpose, stats: e.stats, completion_tokens: e.completion_tokens });
      break;
    case 'exit':
      s.exit = { reason: e.reason, rounds: e.rounds, compactions: e.compactions };
      break;
    case 'final_answer':
      s.finalAnswer = e.text;
      break;
    case 'error':
      currentRound(s).items.push({ kind: 'error', message: e.message });
      break;
  }
}

/** Calls that wait for the user's decision. */
export function pendingApprovals(s: InvestigationState): ToolCallView[] {
  const out: ToolCallView[] = [];
  for (const r of s.rounds)
    for (const it of r.items)
      if (it.kind === 'tool' && it.call.approval && !it.call.approval.decided && !it.call.result) out.push(it.call);
  return out;
}

/** A one-line description of an exit, worded like mf-agent's `ExitReason::describe`. */
export function describeExit(r: ExitReason): string {
  switch (r.kind) {
    case 'final_answer':
      return 'final answer';
    case 'repeated_tool_call':
      return `repeated tool call ${r.name} ${r.arguments}`;
    case 'consecutive_errors':
      return `${r.count} consecutive tool errors`;
    case 'context_exhausted':
      return `context exhausted (${r.tokens} tokens over threshold ${r.threshold} with ${r.messages} messages)`;
    case 'compaction_ineffective':
      return `compaction freed only ${(r.freed_fraction * 100).toFixed(1)} %`;
    case 'compaction_loop':
      return `${r.compactions} compactions without a new tool result`;
    case 'safety_cap':
      return `safety cap of ${r.rounds} rounds`;
    case 'cancelled':
      return 'cancelled';
  }
}

/** `C_d` of the six dimensions, as mf-forgetting's plan carries them. */
export interface Scores {
  data: number;
  causal: number;
  task_reference: number;
  entity: number;
  temporal: number;
  structural: number;
}

export const DIMENSIONS: (keyof Scores)[] = ['data', 'causal', 'task_reference', 'entity', 'temporal', 'structural'];

/**
 * Reads a message's dimension scores out of the full plan a
 * `compaction_started` event carries (v2, v2.1 only; `null` otherwise).
 */
export function dimensionsOf(plan: unknown, id: string): Scores | null {
  if (!plan || typeof plan !== 'object') return null;
  const msgs = (plan as { messages?: unknown }).messages;
  if (!Array.isArray(msgs)) return null;
  for (const m of msgs) {
    if (m && typeof m === 'object' && (m as { id?: unknown }).id === id) {
      const d = (m as { dimensions?: unknown }).dimensions;
      if (!d || typeof d !== 'object') return null;
      const out = {} as Scores;
      for (const k of DIMENSIONS) {
        const v = (d as Record<string, unknown>)[k];
        if (typeof v !== 'number') return null;
        out[k] = v;
      }
      return out;
    }
  }
  return null;
}

export type Fate = 'verbatim' | 'summarised' | 'masked' | 'dropped' | 'kept';

/** Where a message ended up, read off the finished event's id lists. */
export function fateOf(f: CompactionFinished | null, row: PlanRow): Fate | null {
  if (!f) return null;
  if (f.verbatim.includes(row.id)) return 'verbatim';
  if (f.summarised.includes(row.id)) return 'summarised';
  if (f.masked.includes(row.id)) return 'masked';
  if (f.dropped.includes(row.id)) return 'dropped';
  return 'kept';
}

/** Formats a token count with thousands separators (display only). */
export function fmt(n: number): string {
  return n.toLocaleString('en-US');
}
