import { describe, expect, it, vi } from 'vitest';
import { fireEvent, render, screen, within } from '@testing-library/svelte';
import { flushSync } from 'svelte';
import InvestigationView from '../src/lib/components/InvestigationView.svelte';
import { Session } from '../src/lib/session.svelte';
import { ApiError, type HandResult, type MessageCard } from '../src/lib/api';
import type { AgentEvent } from '../src/lib/events';
import { compactionFinished, compactionStarted, gauge, investigationEvents, mockApi, started } from './fixtures';

async function startWith(events: AgentEvent[]) {
  const m = mockApi();
  const session = new Session(m.api);
  render(InvestigationView, { session });
  await fireEvent.input(screen.getByRole('textbox', { name: 'Question' }), { target: { value: 'Which region has the most 5xx errors?' } });
  await fireEvent.click(screen.getByRole('button', { name: 'Investigate' }));
  const send = (e: AgentEvent) => {
    m.sinks.agent?.(e);
    flushSync();
  };
  for (const e of events) send(e);
  return { ...m, session, send };
}

describe('InvestigationView', () => {
  it('streams the answer with collapsible thinking and a tool card that asks for approval', async () => {
    const { api, send } = await startWith(investigationEvents());
    expect(api.startInvestigation).toHaveBeenCalledWith('Which region has the most 5xx errors?', expect.any(Function));
    expect(screen.getByTestId('started').textContent).toContain('strategy v2');
    // A question typed by the user is its own heading, with nothing folded beside it.
    expect(screen.queryByTestId('instructions')).toBeNull();
    const thinking = screen.getByTestId('thinking');
    expect(thinking.textContent).toBe('I should fetch the stats.');
    expect(thinking.closest('details')?.open).toBe(false);

    const card = screen.getByTestId('tool-card');
    expect(within(card).getByTestId('tool-args').textContent).toContain('http://127.0.0.1:8080/errors');
    expect(within(card).getByTestId('approval-args').textContent).toBe('{"url":"http://127.0.0.1:8080/errors"}');
    await fireEvent.click(within(card).getByRole('button', { name: 'Approve' }));
    expect(api.approve).toHaveBeenCalledWith(7, 'call_1', 'ab12', true);

    send({ type: 'approval_decided', call_id: 'call_1', approved: true, by: 'user' });
    expect(within(card).queryByRole('button', { name: 'Approve' })).toBeNull();
    expect(within(card).getByTestId('decision').textContent).toContain('Approved by user');

    send({ type: 'tool_result', call_id: 'call_1', name: 'http_get', ok: true, error: null, content: 'eu-west: 412', truncated: 'result cut to 4000 characters' });
    expect(within(card).getByTestId('tool-result').textContent).toBe('eu-west: 412');
    expect(within(card).getByTestId('tool-result').closest('details')?.open).toBe(false);
    expect(within(card).getByTestId('truncation').textContent).toBe('result cut to 4000 characters');

    send({ type: 'round', round: 2 });
    send({ type: 'token', text: 'eu-west, ' });
    send({ type: 'token', text: 'with 412.' });
    expect(screen.getAllByTestId('answer-text').at(-1)?.textContent).toBe('eu-west, with 412.');
  });

  it('denies a call and stops the investigation through the api', async () => {
    const { api, send } = await startWith(investigationEvents());
    await fireEvent.click(screen.getByRole('button', { name: 'Deny' }));
    expect(api.approve).toHaveBeenCalledWith(7, 'call_1', 'ab12', false);
    await fireEvent.click(screen.getByRole('button', { name: 'Stop' }));
    expect(api.stopInvestigation).toHaveBeenCalledWith(7);
    send({ type: 'exit', reason: { kind: 'cancelled' }, rounds: 1, compactions: 0 });
    expect(screen.getByTestId('exit').textContent).toBe('Stopped after 1 rounds: cancelled.');
    expect((screen.getByRole('button', { name: 'Stop' }) as HTMLButtonElement).disabled).toBe(true);
  });

  it('moves the gauge, shows a compaction in the timeline and opens its ledger with undo', async () => {
    const { api, send } = await startWith([]);
    send({ type: 'gauge', gauge: gauge({ compressible: 100, context: 4000 }) });
    expect(screen.getByTestId('seg-compressible').style.width).toBe('2.5%');
    send({ type: 'gauge', gauge: gauge({ compressible: 2000, context: 4000 }) });
    expect(screen.getByTestId('seg-compressible').style.width).toBe('50%');

    send({ type: 'round', round: 3 });
    send(compactionStarted);
    expect(screen.getByTestId('forecast').textContent).toContain('Compacting now');
    send(compactionFinished);
    const entry = screen.getByTestId('compaction');
    expect(within(entry).getByTestId('compaction-tokens').textContent).toBe('2,990 → 1,402 tokens');
    expect(entry.textContent).toContain('class aggregation');
    // The model that wrote the summary is named (a summariser chosen in the settings, here).
    expect(entry.textContent).toContain('model summary by gemma-3-270m-q4_k_m, appended to the live cache');

    await fireEvent.click(within(entry).getByRole('button'));
    const ledgerRows = screen.getAllByTestId('ledger-row');
    expect(ledgerRows.map((r) => within(r).getByTestId('fate').textContent)).toEqual(['kept', 'verbatim', 'dropped', 'summarised']);
    expect(within(ledgerRows[1]!).getByTestId('dim-task_reference').textContent).toBe('1.00');
    expect(within(ledgerRows[0]!).getByTestId('dim-data').textContent).toBe('—');
    expect(screen.getByTestId('ledger-class').textContent).toBe('aggregation');
    expect(screen.getByTestId('ledger-summary').textContent).toBe('eu-west has 412 5xx errors; us-east 77.');
    expect(screen.getByTestId('ledger-summary-by').textContent).toBe('Summary (model, written by gemma-3-270m-q4_k_m)');

    // Undo waits until the loop has stopped.
    const undo = screen.getByRole('button', { name: 'Undo this compaction' }) as HTMLButtonElement;
    expect(undo.disabled).toBe(true);
    send({ type: 'exit', reason: { kind: 'final_answer' }, rounds: 3, compactions: 1 });
    expect(undo.disabled).toBe(false);
    await fireEvent.click(undo);
    expect(api.undoCompaction).toHaveBeenCalledWith(7, 3);
    expect(screen.getByRole('button', { name: 'Restored' })).toBeTruthy();
  });

  it('shows a command error from the backend', async () => {
    const m = mockApi({
      startInvestigation: async () => {
        throw new ApiError({ code: 'model_not_found', message: 'no model at /models/x.gguf' });
      },
    });
    render(InvestigationView, { session: new Session(m.api) });
    await fireEvent.input(screen.getByRole('textbox', { name: 'Question' }), { target: { value: 'q' } });
    await fireEvent.click(screen.getByRole('button', { name: 'Investigate' }));
    expect((await screen.findByRole('alert')).textContent).toBe('no model at /models/x.gguf');
    expect((screen.getByRole('button', { name: 'Investigate' }) as HTMLButtonElement).disabled).toBe(false);
  });

  it('reopens a stored investigation by replaying its events, without live controls', async () => {
    const events: AgentEvent[] = [...investigationEvents(), { type: 'exit', reason: { kind: 'consecutive_errors', count: 3 }, rounds: 1, compactions: 0 }];
    const m = mockApi({ investigationEvents: async () => events });
    const session = new Session(m.api);
    render(InvestigationView, { session });
    await session.reopen(12);
    flushSync();
    expect(session.id).toBe(12);
    expect(screen.getByTestId('exit').textContent).toContain('3 consecutive tool errors');
    expect((screen.getByRole('button', { name: 'Approve' }) as HTMLButtonElement).disabled).toBe(true);
  });
});

describe('InvestigationView with repeated numbers', () => {
  it('renders a resumed run whose rounds restart and two compactions in one round, and opens the second', async () => {
    const second = { ...compactionFinished, tokens_before: 2000, tokens_after: 990 } as AgentEvent;
    const { send } = await startWith([
      { type: 'round', round: 1 },
      { type: 'token', text: 'first run' },
      { type: 'started', question: 'q', strategy: 'v2', model: 'm', context: 4096, reserve: 512, threshold: 2880, tools: [], resumed: true },
      { type: 'round', round: 1 },
      { type: 'token', text: 'resumed run' },
      compactionStarted,
      compactionFinished,
      compactionStarted,
      second,
    ]);
    expect(screen.getAllByTestId('round')).toHaveLength(2);
    expect(screen.getAllByTestId('answer-text').map((p) => p.textContent)).toEqual(['first run', 'resumed run']);
    const entries = screen.getAllByTestId('compaction');
    expect(entries.map((e) => within(e).getByTestId('compaction-tokens').textContent)).toEqual(['2,990 → 1,402 tokens', '2,000 → 990 tokens']);
    await fireEvent.click(within(entries[1]!).getByRole('button'));
    expect(screen.getByRole('region', { name: 'Compaction ledger' }).textContent).toContain('2,000 → 990 tokens');
    send({ type: 'token', text: '.' });
  });
});

describe('Session', () => {
  it('sends an approval that arrives before the start command has returned its id', async () => {
    let resolveStart: (id: number) => void = () => {};
    let sink: ((e: AgentEvent) => void) | null = null;
    const m = mockApi({
      startInvestigation: (_q, on) => {
        sink = on;
        return new Promise<number>((r) => (resolveStart = r));
      },
    });
    const session = new Session(m.api);
    const started = session.start('q');
    for (const e of investigationEvents()) sink!(e);
    const decided = session.decide('call_1', 'ab12', true);
    expect(m.api.approve).not.toHaveBeenCalled();
    resolveStart(41);
    await Promise.all([started, decided]);
    expect(m.api.approve).toHaveBeenCalledWith(41, 'call_1', 'ab12', true);
  });
});

describe('the empty state', () => {
  it('offers every demo world with its title and question, and one click starts it', async () => {
    const m = mockApi();
    const session = new Session(m.api);
    render(InvestigationView, { session });
    const cards = await screen.findAllByTestId('demo-world');
    expect(cards.map((c) => [within(c).getByRole('heading').textContent, c.textContent?.includes('over 95 % full')])).toEqual([
      ['Who owns the full disk?', true],
      ['Why did 5xx errors spike?', false],
    ]);
    expect(cards[1]!.textContent).toContain('“Which region has the most 5xx errors, and why?”');
    expect(cards[1]!.textContent).toContain('4 tools');

    await fireEvent.click(screen.getByRole('button', { name: 'Run demo: Why did 5xx errors spike?' }));
    expect(m.api.startDemo).toHaveBeenCalledWith('error-spike', expect.any(Function));
    expect(m.api.startInvestigation).not.toHaveBeenCalled();
    // The demo streams like any investigation, and the offer gives way to it.
    // Its heading is the plain question; the route the model is told goes folded beside it.
    const route = 'Call the http tool on http://127.0.0.1:4100/errors.json, then answer: which region has the most 5xx errors, and why?';
    m.sinks.agent?.({ ...started, question: route, title: 'Which region has the most 5xx errors, and why?' } as AgentEvent);
    flushSync();
    expect(screen.queryAllByTestId('demo-world')).toHaveLength(0);
    expect(screen.getByRole('heading', { name: 'Which region has the most 5xx errors, and why?' })).toBeTruthy();
    const instructions = screen.getByTestId('instructions') as HTMLDetailsElement;
    expect(instructions.open).toBe(false);
    expect(instructions.textContent).toContain(route);
    expect(session.id).toBe(8);
  });

  it('offers nothing when the shell has no demo worlds', async () => {
    const m = mockApi({
      listDemoWorlds: async () => {
        throw new ApiError({ code: 'unknown_command', message: 'no list_demo_worlds' });
      },
    });
    render(InvestigationView, { session: new Session(m.api) });
    await new Promise((r) => setTimeout(r, 0));
    flushSync();
    expect(screen.queryByRole('region', { name: 'Demo worlds' })).toBeNull();
    expect(screen.queryByRole('alert')).toBeNull();
  });
});

describe('keyboard', () => {
  it('sends the question with Ctrl+Enter or Cmd+Enter, not with Enter alone', async () => {
    const m = mockApi();
    render(InvestigationView, { session: new Session(m.api) });
    const box = screen.getByRole('textbox', { name: 'Question' });
    await fireEvent.input(box, { target: { value: 'Who owns web-03?' } });
    await fireEvent.keyDown(box, { key: 'Enter' });
    expect(m.api.startInvestigation).not.toHaveBeenCalled();
    await fireEvent.keyDown(box, { key: 'Enter', ctrlKey: true });
    expect(m.api.startInvestigation).toHaveBeenCalledWith('Who owns web-03?', expect.any(Function));

    const m2 = mockApi();
    render(InvestigationView, { session: new Session(m2.api) });
    const box2 = screen.getAllByRole('textbox', { name: 'Question' })[1]!;
    await fireEvent.input(box2, { target: { value: 'q' } });
    await fireEvent.keyDown(box2, { key: 'Enter', metaKey: true });
    expect(m2.api.startInvestigation).toHaveBeenCalledWith('q', expect.any(Function));
  });
});

describe('approvals that show what leaves', () => {
  const post = (summary?: string): AgentEvent[] => [
    { type: 'round', round: 1 },
    { type: 'tool_call', call_id: 'call_7', name: 'http', arguments: { method: 'POST', url: 'https://api.example.com/r', body: '{"report": "…"}' } },
    {
      type: 'approval_requested',
      call_id: 'call_7',
      name: 'http',
      arguments: '{"body":"{\\"report\\": \\"…\\"}","method":"POST","url":"https://api.example.com/r"}',
      args_sha256: 'f00d',
      summary: summary ?? '',
      host: 'api.example.com',
    } as AgentEvent,
  ];

  it('shows the summary line first and bold, the full arguments folded below', async () => {
    await startWith(post('POST api.example.com · 12,345 bytes · {"report": …'));
    const card = screen.getByTestId('tool-card');
    const line = within(card).getByTestId('approval-summary');
    expect(line.tagName).toBe('STRONG');
    expect(line.textContent).toBe('POST api.example.com · 12,345 bytes · {"report": …');
    const args = within(card).getByTestId('approval-args');
    expect(args.closest('details')?.open).toBe(false);
    // The summary comes before the arguments in the card.
    expect(line.compareDocumentPosition(args) & Node.DOCUMENT_POSITION_FOLLOWING).toBeTruthy();
  });

  it('shows the arguments as before when the event has no summary', async () => {
    await startWith(post());
    const card = screen.getByTestId('tool-card');
    expect(within(card).queryByTestId('approval-summary')).toBeNull();
    expect(within(card).getByTestId('approval-args').closest('details')).toBeNull();
  });

  it('allows the host for the session with scope "host"', async () => {
    const { api } = await startWith(post('POST api.example.com · 12 bytes · {}'));
    await fireEvent.click(screen.getByRole('button', { name: 'Allow this host for the session' }));
    expect(api.approve).toHaveBeenCalledWith(7, 'call_7', 'f00d', true, 'host');
    await fireEvent.click(screen.getByRole('button', { name: 'Approve' }));
    expect(api.approve).toHaveBeenLastCalledWith(7, 'call_7', 'f00d', true);
  });

  it('offers no host-wide approval for a tool that talks to no host', async () => {
    await startWith(investigationEvents().map((e) => (e.type === 'tool_call' || e.type === 'approval_requested' ? { ...e, name: 'read_file' } : e)));
    expect(screen.getByRole('button', { name: 'Approve' })).toBeTruthy();
    expect(screen.queryByRole('button', { name: 'Allow this host for the session' })).toBeNull();
    expect(screen.queryByRole('button', { name: 'Always allow this tool' })).toBeNull();
  });

  it('answers a tool from an MCP server for good with scope "tool", approve or deny', async () => {
    const mcp: AgentEvent[] = [
      { type: 'round', round: 1 },
      { type: 'tool_call', call_id: 'call_7', name: 'tickets__close', arguments: { id: 7 } },
      {
        type: 'approval_requested',
        call_id: 'call_7',
        name: 'tickets__close',
        arguments: '{"id":7}',
        args_sha256: 'f00d',
        summary: 'MCP server tickets · tool close · {"id":7}',
        mcp: { server: 'tickets', tool: 'close' },
      } as AgentEvent,
    ];
    const { api } = await startWith(mcp);
    expect(screen.getByTestId('approval-summary').textContent).toBe('MCP server tickets · tool close · {"id":7}');
    expect(screen.queryByRole('button', { name: 'Allow this host for the session' })).toBeNull();
    await fireEvent.click(screen.getByRole('button', { name: 'Always allow this tool' }));
    expect(api.approve).toHaveBeenLastCalledWith(7, 'call_7', 'f00d', true, 'tool');
    await fireEvent.click(screen.getByRole('button', { name: 'Always deny this tool' }));
    expect(api.approve).toHaveBeenLastCalledWith(7, 'call_7', 'f00d', false, 'tool');
  });
});

describe('KV cache on resume', () => {
  it('says how many tokens were not decoded again when the saved cache was loaded', async () => {
    await startWith([{ type: 'kv_restore', slot: 'file:7.kv', used: true, snapshot_tokens: 1300, prompt_tokens: 1320, matched_tokens: 1287, note: null }]);
    expect(screen.getByTestId('kv-restore').textContent?.trim()).toBe('KV cache loaded: 1,287 tokens not decoded again');
  });

  it('says why the cache was not loaded', async () => {
    await startWith([{ type: 'kv_restore', slot: 'file:7.kv', used: false, snapshot_tokens: 1300, prompt_tokens: 1320, matched_tokens: 0, note: 'the model file changed' }]);
    expect(screen.getByTestId('kv-restore').textContent?.trim()).toBe('KV cache not loaded: the model file changed');
  });
});

describe('answers as markdown', () => {
  it('renders the final answer and streamed text as sanitized markdown', async () => {
    await startWith([
      { type: 'round', round: 1 },
      { type: 'token', text: '**eu-west** <img src="http://evil.example/x.png">' },
      { type: 'final_answer', text: '- **eu-west**: 412\n- [details](javascript:alert(1))\n\n<script>alert(1)</script>' },
    ]);
    const answer = screen.getByTestId('final-answer');
    expect(answer.querySelector('li strong')?.textContent).toBe('eu-west');
    expect(answer.querySelector('script, a[href]')).toBeNull();
    expect(answer.textContent).toContain('<script>alert(1)</script>');
    const streamed = screen.getByTestId('answer-text');
    expect(streamed.querySelector('strong')?.textContent).toBe('eu-west');
    expect(streamed.querySelector('img')).toBeNull();
  });
});

describe('New investigation', () => {
  it('puts a finished run away and offers the demo worlds again; not while a run is live', async () => {
    const { send } = await startWith(investigationEvents());
    expect(screen.queryByRole('button', { name: 'New investigation' })).toBeNull();
    send({ type: 'exit', reason: { kind: 'final_answer' }, rounds: 1, compactions: 0 });
    await fireEvent.click(screen.getByRole('button', { name: 'New investigation' }));
    expect(screen.queryByTestId('started')).toBeNull();
    expect(screen.queryAllByTestId('tool-card')).toHaveLength(0);
    expect(await screen.findAllByTestId('demo-world')).toHaveLength(2);
  });
});

describe('the hand between rounds', () => {
  const card = (id: string, kind: string, zone: string, text: string, summarisable = true): MessageCard => ({
    id,
    kind,
    zone,
    pinned: false,
    pinned_with_chain: false,
    summarisable,
    text,
  });

  it('pins a message, summarises up to one and compacts now once the run is stopped; never while it runs', async () => {
    let pinned = false;
    const history = (): MessageCard[] => [
      card('m0', 'system', 'pinned', 'You investigate.', false),
      card('m1', 'user', 'pinned', 'Which region has the most 5xx errors?', false),
      { ...card('m2', 'tool-call', pinned ? 'pinned' : 'compressible', 'http {"url":"/errors"}'), pinned_with_chain: pinned },
      { ...card('m3', 'tool-result', pinned ? 'pinned' : 'compressible', 'eu-west: 412'), pinned },
      card('m4', 'tool-call', 'compressible', 'http {"url":"/regions"}'),
      card('m5', 'tool-result', 'recent', 'us-east: 77'),
    ];
    const started = compactionStarted as Extract<AgentEvent, { type: 'compaction_started' }>;
    const compact = vi.fn(async (_id: number, upTo: string | null, _s: string | null, on: (e: AgentEvent) => void): Promise<HandResult> => {
      on({ ...started, round: 1, by_hand: upTo ? { kind: 'up_to', message: upTo } : { kind: 'compact_now' } });
      on({ ...(compactionFinished as Extract<AgentEvent, { type: 'compaction_finished' }>), round: 1 });
      return upTo ? { tokens_before: 2990, tokens_after: 1402, unchanged: null } : { tokens_before: 1402, tokens_after: 1402, unchanged: 'the plan kept the history as it was' };
    });
    const m = mockApi({
      investigationHistory: vi.fn(async () => history()),
      pinMessage: vi.fn(async (_id: number, message: string, p: boolean, on: (e: AgentEvent) => void) => {
        pinned = p;
        on({ type: 'pin', message, pinned: p, members: ['m2', 'm3'], round: 1 });
        return ['m2', 'm3'];
      }),
      compactInvestigation: compact,
    });
    const session = new Session(m.api);
    render(InvestigationView, { session });
    await fireEvent.input(screen.getByRole('textbox', { name: 'Question' }), { target: { value: 'Which region has the most 5xx errors?' } });
    await fireEvent.click(screen.getByRole('button', { name: 'Investigate' }));
    const send = (e: AgentEvent) => {
      m.sinks.agent?.(e);
      flushSync();
    };
    for (const e of investigationEvents()) send(e);
    // While the run is live: every button waits, nothing is loaded.
    expect((screen.getByTestId('compact-now') as HTMLButtonElement).disabled).toBe(true);
    expect(m.api.investigationHistory).not.toHaveBeenCalled();
    send({ type: 'exit', reason: { kind: 'cancelled' }, rounds: 1, compactions: 0 });
    const cards = await screen.findAllByTestId('message-card');
    expect(cards.map((c) => c.dataset.id)).toEqual(['m0', 'm1', 'm2', 'm3', 'm4', 'm5']);
    expect(within(cards[0]!).queryByTestId('summarise-up-to')).toBeNull();

    // Keep verbatim: the card and its chain say so, the pin is in the transcript and the timeline.
    await fireEvent.click(within(cards[3]!).getByTestId('pin'));
    expect(m.api.pinMessage).toHaveBeenCalledWith(7, 'm3', true, expect.any(Function));
    await vi.waitFor(() => expect(within(screen.getAllByTestId('message-card')[3]!).getByTestId('pinned-badge').textContent).toBe('kept verbatim'));
    const after = screen.getAllByTestId('message-card');
    expect(within(after[2]!).getByTestId('pinned-badge').textContent).toBe('kept verbatim with its chain');
    expect(within(after[2]!).getByTestId('pin')).toHaveProperty('disabled', true);
    expect(screen.getByTestId('pin-note').textContent).toContain('m3 kept verbatim with its chain (m2, m3)');
    expect(screen.getByTestId('pin-entry').textContent).toContain('m3 kept verbatim');

    // Summarise up to m4: the compaction is in the timeline, asked for by hand.
    await fireEvent.click(within(after[4]!).getByTestId('summarise-up-to'));
    expect(m.api.compactInvestigation).toHaveBeenCalledWith(7, 'm4', null, expect.any(Function));
    await vi.waitFor(() => expect(screen.getByTestId('hand-note').textContent).toBe('Compacted up to m4: 2,990 → 1,402 prompt tokens.'));
    expect(screen.getByTestId('by-hand').textContent).toBe('by hand: summarise up to m4');

    // Compact now with another strategy; the refusal is said plainly.
    await fireEvent.change(screen.getByTestId('hand-strategy'), { target: { value: 'v1' } });
    await fireEvent.click(screen.getByTestId('compact-now'));
    expect(m.api.compactInvestigation).toHaveBeenLastCalledWith(7, null, 'v1', expect.any(Function));
    await vi.waitFor(() => expect(screen.getByTestId('hand-note').textContent).toBe('Not compacted: the plan kept the history as it was'));
    expect(screen.getAllByTestId('by-hand').map((e) => e.textContent)).toEqual(['by hand: summarise up to m4', 'by hand: compact now']);

    // A failure is shown as the backend worded it.
    compact.mockRejectedValueOnce(new ApiError({ code: 'busy', message: 'An investigation is running; stop it first.' }));
    await fireEvent.click(screen.getByTestId('compact-now'));
    expect((await screen.findByRole('alert')).textContent).toBe('An investigation is running; stop it first.');
  });
});
