// Folds the agent's events into what the investigation view shows. It only
// files events where they belong: every number it holds came in an event.

import type { AgentEvent, ExitReason, Gauge, JsonValue, KvStats } from './events';

export interface ToolCallView {
  call_id: string;
  name: string;
  arguments: JsonValue;
  /** Set when the loop asked for a decision. */
  approval: { arguments_hash: string; decided: { approved: boolean; by: string } | null } | null;
  result: { ok: boolean; content: string; truncated: string | null } | null;
  /** A call from a killed process that never got its result. */
  interrupted: boolean;
}

export type RoundItem =
  | { kind: 'thinking'; text: string }
  | { kind: 'text'; text: string }
  | { kind: 'tool'; call: ToolCallView }
  | { kind: 'compaction'; round: number }
  | { kind: 'error'; message: string };

export interface RoundView {
  /** 1-based; 0 holds what came before the first round. */
  round: number;
  items: RoundItem[];
}

export interface KvEntry {
  /** The round (0 for a summary pass). */
  round: number;
  stats: KvStats;
  completion_tokens: number;
}

export interface CompactionView {
  round: number;
  started: { tokens_before: number; messages_before: number; compressible: number } | null;
  finished: Extract<AgentEvent, { type: 'compaction_finished' }> | null;
}

export interface InvestigationState {
  started: Extract<AgentEvent, { type: 'started' }> | null;
  rounds: RoundView[];
  /** The latest gauge. */
  gauge: Gauge | null;
  kv: KvEntry[];
  compactions: CompactionView[];
  exit: { reason: ExitReason; rounds: number } | null;
  finalAnswer: string | null;
  /** How many events were folded in. */
  events: number;
}

export function emptyState(): InvestigationState {
  return { started: null, rounds: [], gauge: null, kv: [], compactions: [], exit: null, finalAnswer: null, events: 0 };
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
  if (last && last.round === round && !last.finished) return last;
  const c: CompactionView = { round, started: null, finished: null };
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
      if (c) c.approval = { arguments_hash: e.arguments_hash, decided: null };
      break;
    }
    case 'approval_decided': {
      const c = findCall(s, e.call_id);
      if (c) {
        // A policy decision arrives without a request: record it all the same.
        if (!c.approval) c.approval = { arguments_hash: '', decided: null };
        c.approval.decided = { approved: e.approved, by: e.by };
      }
      break;
    }
    case 'tool_result': {
      const c = findCall(s, e.call_id);
      const result = { ok: e.ok, content: e.content, truncated: e.truncated };
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
    case 'gauge': {
      const { type: _t, ...g } = e;
      s.gauge = g;
      break;
    }
    case 'compaction_started':
      compactionFor(s, e.round).started = {
        tokens_before: e.tokens_before,
        messages_before: e.messages_before,
        compressible: e.compressible,
      };
      break;
    case 'compaction_finished':
      compactionFor(s, e.round).finished = e;
      break;
    case 'kv':
      s.kv.push({ round: e.round, stats: e.stats, completion_tokens: e.completion_tokens });
      break;
    case 'exit':
      s.exit = { reason: e.reason, rounds: e.rounds };
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
      return `repeated tool call (${r.name})`;
    case 'consecutive_failures':
      return `${r.count} consecutive tool failures`;
    case 'context_exhausted':
      return `context exhausted (${r.tokens} tokens, threshold ${r.threshold})`;
    case 'compaction_loop':
      return 'compaction freed no room (compaction-loop guard)';
    case 'safety_cap':
      return `safety cap of ${r.rounds} rounds`;
  }
}

/** Formats a token count with thousands separators (display only). */
export function fmt(n: number): string {
  return n.toLocaleString('en-US');
}
