import { describe, expect, it } from 'vitest';
import { applyEvent, describeExit, dimensionsOf, emptyState, fateOf, findCall, pendingApprovals } from '../src/lib/investigation';
import { compactionFinished, compactionStarted, investigationEvents, rows } from './fixtures';
import type { CompactionFinished } from '../src/lib/investigation';
import type { AgentEvent } from '../src/lib/events';

function fold(events = investigationEvents()) {
  const s = emptyState();
  for (const e of events) applyEvent(s, e);
  return s;
}

describe('applyEvent', () => {
  it('joins streamed pieces of the same kind and starts a new item on a change of kind', () => {
    const s = fold([
      { type: 'round', round: 1 },
      { type: 'thinking_token', text: 'a' },
      { type: 'thinking_token', text: 'b' },
      { type: 'token', text: 'X' },
      { type: 'token', text: 'Y' },
      { type: 'thinking_token', text: 'c' },
    ]);
    expect(s.rounds).toHaveLength(1);
    expect(s.rounds[0]?.items).toEqual([
      { kind: 'thinking', text: 'ab' },
      { kind: 'text', text: 'XY' },
      { kind: 'thinking', text: 'c' },
    ]);
  });

  it('files approvals and results under their call, and lists calls waiting for a decision', () => {
    const s = fold();
    expect(pendingApprovals(s).map((c) => c.call_id)).toEqual(['call_1']);
    applyEvent(s, { type: 'approval_decided', call_id: 'call_1', approved: true, by: 'user' });
    expect(pendingApprovals(s)).toEqual([]);
    applyEvent(s, { type: 'tool_result', call_id: 'call_1', name: 'http_get', ok: true, error: null, content: '{"eu":412}', truncated: 'cut at 4000 characters' });
    const c = findCall(s, 'call_1');
    expect(c?.approval).toEqual({ arguments: '{"url":"http://127.0.0.1:8080/errors"}', args_sha256: 'ab12', summary: null, host: null, mcp: null, decided: { approved: true, by: 'user' } });
    expect(c?.result).toEqual({ ok: true, error: null, content: '{"eu":412}', truncated: 'cut at 4000 characters' });
  });

  it('keeps a result or an interruption whose call it never saw (a resumed session)', () => {
    const s = fold([
      { type: 'tool_interrupted', call_id: 'old', name: 'run_code' },
      { type: 'tool_result', call_id: '', name: '', ok: false, error: 'malformed_tool_call', content: 'bad json', truncated: null },
    ]);
    const items = s.rounds[0]?.items ?? [];
    expect(items.map((i) => (i.kind === 'tool' ? [i.call.call_id, i.call.interrupted, i.call.result?.error ?? null] : i.kind))).toEqual([
      ['old', true, null],
      ['', false, 'malformed_tool_call'],
    ]);
  });

  it('pairs compaction start and end by round and keeps the gauge and KV events as given', () => {
    const s = fold([
      { type: 'round', round: 3 },
      compactionStarted,
      { type: 'kv', round: 3, purpose: 'summary', stats: { prompt_tokens: 3000, reused: 2990, decoded: 10, trimmed: 0, full_clear: false, prefill_ms: 40, decode_ms: 900 }, completion_tokens: 60 },
      compactionFinished,
      { type: 'gauge', gauge: { pinned: 1, compressible: 2, recent: 3, free: 999, threshold: 5, prompt_tokens: 6, context: 7, reserve: 8, messages: 9 } },
      { type: 'round', round: 4 },
      { type: 'compaction_started', round: 4, strategy: 'v2', tokens_before: 3100, messages_before: 8, class: null, rows: [], plan: null },
      { type: 'compaction_failed', round: 4, message: 'pinned zone alone is over the threshold' },
      { type: 'exit', reason: { kind: 'context_exhausted', tokens: 3100, threshold: 2880, messages: 8 }, rounds: 4, compactions: 2 },
    ]);
    expect(s.compactions).toHaveLength(2);
    expect(s.compactions[0]?.started?.class).toBe('aggregation');
    expect(s.compactions[0]?.finished?.tokens_after).toBe(1402);
    expect(s.compactions[1]?.failed).toBe('pinned zone alone is over the threshold');
    // The gauge is stored verbatim, even where its numbers do not add up.
    expect(s.gauge).toEqual({ pinned: 1, compressible: 2, recent: 3, free: 999, threshold: 5, prompt_tokens: 6, context: 7, reserve: 8, messages: 9 });
    expect(s.kv[0]?.purpose).toBe('summary');
    expect(s.rounds.find((r) => r.round === 3)?.items).toEqual([{ kind: 'compaction', round: 3 }]);
    expect(s.exit?.compactions).toBe(2);
    expect(s.events).toBe(9);
  });
});

describe('ledger helpers', () => {
  it('reads dimensions from the plan by id and gives null where the plan has none', () => {
    const plan = (compactionStarted as { plan: unknown }).plan;
    expect(dimensionsOf(plan, 'm3')).toEqual({ data: 0.8, causal: 0.25, task_reference: 1, entity: 0.5, temporal: 0, structural: 0.125 });
    expect(dimensionsOf(plan, 'm5')).toBeNull();
    expect(dimensionsOf(plan, 'nope')).toBeNull();
    expect(dimensionsOf(null, 'm3')).toBeNull();
    expect(dimensionsOf({ messages: [{ id: 'x', dimensions: { data: 'high' } }] }, 'x')).toBeNull();
  });

  it('reads each fate off the finished event lists', () => {
    const f = compactionFinished as CompactionFinished;
    expect(rows.map((r) => fateOf(f, r))).toEqual(['kept', 'verbatim', 'dropped', 'summarised']);
    expect(fateOf(null, rows[0]!)).toBeNull();
  });

  it('describes every exit like the Rust side', () => {
    expect(describeExit({ kind: 'compaction_ineffective', freed_fraction: 0.031 })).toBe('compaction freed only 3.1 %');
    expect(describeExit({ kind: 'repeated_tool_call', name: 'http_get', arguments: '{"url":"x"}' })).toBe('repeated tool call http_get {"url":"x"}');
    expect(describeExit({ kind: 'cancelled' })).toBe('cancelled');
  });
});

describe('forecast and compaction time', () => {
  it("keeps the latest gauge's forecast (cleared when a gauge has none)", () => {
    const s = emptyState();
    const g = { pinned: 1, compressible: 2, recent: 3, free: 4, threshold: 10, prompt_tokens: 6, context: 20, reserve: 4, messages: 2 };
    const forecast = { tokens_left: 4, mean_tokens_per_round: 2, rounds_until_compaction: 2, window: 2 };
    applyEvent(s, { type: 'gauge', gauge: g, forecast });
    expect(s.forecast).toEqual(forecast);
    applyEvent(s, { type: 'gauge', gauge: g });
    expect(s.forecast).toBeNull();
  });
});

describe('context over rounds', () => {
  it('records every gauge with its round and marks where each compaction finished', () => {
    const g = (prompt_tokens: number) => ({ pinned: 1, compressible: 2, recent: 3, free: 4, threshold: 10, prompt_tokens, context: 20, reserve: 4, messages: 2 });
    const s = fold([
      { type: 'gauge', gauge: g(5) },
      { type: 'round', round: 1 },
      { type: 'gauge', gauge: g(9) },
      { type: 'round', round: 2 },
      { ...compactionStarted, round: 2 } as AgentEvent,
      { type: 'gauge', gauge: g(12) },
      { ...compactionFinished, round: 2 } as AgentEvent,
      { type: 'gauge', gauge: g(6) },
    ]);
    expect(s.samples.map((x) => [x.round, x.gauge.prompt_tokens])).toEqual([
      [0, 5],
      [1, 9],
      [2, 12],
      [2, 6],
    ]);
    // Finished after three gauges: the drop is drawn before the fourth.
    expect(s.compactions[0]?.at).toBe(3);
  });
});

describe('events newer than the generated types', () => {
  it("keeps an approval request's summary line when it has one", () => {
    const s = fold([
      { type: 'round', round: 1 },
      { type: 'tool_call', call_id: 'c1', name: 'http', arguments: { method: 'POST' } },
      { type: 'approval_requested', call_id: 'c1', name: 'http', arguments: '{"method":"POST"}', args_sha256: 'h', summary: 'POST api.example.com · 12,345 bytes · {"report": …' } as AgentEvent,
    ]);
    expect(findCall(s, 'c1')?.approval?.summary).toBe('POST api.example.com · 12,345 bytes · {"report": …');
  });

  it('keeps the latest KV restore', () => {
    const s = fold([
      { type: 'kv_restore', slot: 'file:a.kv', used: false, snapshot_tokens: 0, prompt_tokens: 900, matched_tokens: 0, note: 'model file changed' },
      { type: 'kv_restore', slot: 'file:b.kv', used: true, snapshot_tokens: 1200, prompt_tokens: 1300, matched_tokens: 1187, note: null },
    ]);
    expect(s.kvRestore?.slot).toBe('file:b.kv');
    expect(s.kvRestore?.matched_tokens).toBe(1187);
  });
});
