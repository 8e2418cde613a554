import { describe, expect, it, vi } from 'vitest';
import { fireEvent, render, screen, within } from '@testing-library/svelte';
import HistoryList from '../src/lib/components/HistoryList.svelte';
import { ApiError, type InvestigationRow } from '../src/lib/api';
import { mockApi, replayResult } from './fixtures';

const rows: InvestigationRow[] = [
  { id: 2, question: 'First call the http tool with url http://127.0.0.1:4100/disks.json, then say who owns disk sdb.', title: 'Who owns disk sdb?', status: 'interrupted', exit_reason: null, exit_kind: null, resumable: true, created: 1_764_750_000, events: 31 },
  { id: 1, question: 'Row count?', status: 'finished', exit_reason: 'final answer', exit_kind: 'final_answer', resumable: false, created: 1_764_740_000, events: 12 },
  { id: 3, question: 'Stopped one', status: 'finished', exit_reason: 'cancelled', exit_kind: 'cancelled', resumable: true, created: 1_764_730_000, events: 9 },
  { id: 4, question: 'Capped one', status: 'finished', exit_reason: 'safety cap of 5 rounds', exit_kind: 'safety_cap', resumable: true, created: 1_764_720_000, events: 40 },
];

describe('HistoryList', () => {
  it('lists stored investigations and reopens or resumes them', async () => {
    const m = mockApi({ listInvestigations: vi.fn(async () => rows) });
    const onreopen = vi.fn();
    const onresume = vi.fn();
    render(HistoryList, { api: m.api, onreopen, onresume });
    const trs = await screen.findAllByTestId('history-row');
    expect(trs[0]?.textContent).toContain('2025-12-03 08:20');
    // A demo's row shows its plain question, the whole one on hover.
    const q = trs[0]!.querySelector('td.q') as HTMLElement;
    expect(q.textContent).toBe('Who owns disk sdb?');
    expect(q.title).toContain('http://127.0.0.1:4100/disks.json');
    expect(trs[1]!.querySelector('td.q')?.textContent).toBe('Row count?');
    expect(trs[1]?.textContent).toContain('final answer');
    await fireEvent.click(within(trs[1]!).getByRole('button', { name: 'Reopen' }));
    expect(onreopen).toHaveBeenCalledWith(1);
    expect((within(trs[1]!).getByRole('button', { name: 'Resume' }) as HTMLButtonElement).disabled).toBe(true);
    await fireEvent.click(within(trs[0]!).getByRole('button', { name: 'Resume' }));
    expect(onresume).toHaveBeenCalledWith(2);
    // Stopped by the user: it can be continued.
    await fireEvent.click(within(trs[2]!).getByRole('button', { name: 'Resume' }));
    expect(onresume).toHaveBeenLastCalledWith(3);
    // Stopped by its round cap: it can be continued too.
    await fireEvent.click(within(trs[3]!).getByRole('button', { name: 'Resume' }));
    expect(onresume).toHaveBeenLastCalledWith(4);
  });

  it('shows a store error', async () => {
    const m = mockApi({
      listInvestigations: async () => {
        throw new ApiError({ code: 'store', message: 'database is locked' });
      },
    });
    render(HistoryList, { api: m.api });
    expect((await screen.findByRole('alert')).textContent).toBe('database is locked');
  });

  it('compares strategies on an investigation: progress, the table and chart, the live strategy marked, and Use this strategy', async () => {
    const m = mockApi({ listInvestigations: vi.fn(async () => rows) });
    const onusestrategy = vi.fn();
    render(HistoryList, { api: m.api, onusestrategy });
    const trs = await screen.findAllByTestId('history-row');
    await fireEvent.click(within(trs[1]!).getByRole('button', { name: 'Compare strategies' }));
    const view = await screen.findByTestId('replay');
    expect(view.textContent).toContain('investigation 1');
    await fireEvent.click(within(view).getByRole('button', { name: 'Compare' }));
    expect(m.api.replayInvestigation).toHaveBeenCalledWith(1, ['masking', 'v1', 'v2', 'v2.1'], expect.any(Function));
    m.sinks.replay!({ type: 'progress', done: 3, total: 10, label: 'point 1 of 2: v2 compacted' });
    expect((await screen.findByTestId('replay-progress')).textContent).toContain('3/10 · point 1 of 2: v2 compacted');
    m.sinks.replay!({ type: 'finished', result: replayResult() });
    const table = await screen.findByTestId('replay-table');
    const body = within(table).getAllByTestId('replay-row');
    expect(body.map((r) => r.querySelector('td')?.textContent?.trim().split(/\s+/)[0])).toEqual(['full', 'baseline', 'masking', 'v1', 'v2']);
    // The shell's figures, as given: R with its interval, tokens after each point, a compaction that grew.
    expect(body[4]!.textContent).toContain('0.66 [0.41, 0.88]');
    expect(body[2]!.textContent).toContain('1750 (grew)');
    expect(body[2]!.textContent).toContain('6 (3 grew)');
    // The strategy the investigation ran is marked, in the table and the legend.
    expect(body[3]!.textContent).toContain('ran live');
    expect(body[3]!.classList.contains('live')).toBe(true);
    expect(screen.getByText(/v1 \(ran live\)/)).toBeTruthy();
    // The chart: one line per strategy, a point per compaction point where R exists (masking grew at point 2).
    const chart = screen.getByTestId('replay-chart');
    expect(chart.querySelectorAll('polyline')).toHaveLength(3);
    expect(chart.querySelectorAll('circle')).toHaveLength(5);
    expect(screen.queryByTestId('replay-progress')).toBeNull();
    // Neither the ceiling nor the floor can be chosen; a strategy can.
    expect(within(body[0]!).queryByRole('button')).toBeNull();
    expect(within(body[1]!).queryByRole('button')).toBeNull();
    await fireEvent.click(within(body[4]!).getByRole('button', { name: 'Use this strategy' }));
    expect(onusestrategy).toHaveBeenCalledWith('v2', 1);
  });

  it('says why a comparison could not run, and only what was chosen is compared', async () => {
    const m = mockApi({ listInvestigations: vi.fn(async () => rows) });
    render(HistoryList, { api: m.api });
    const trs = await screen.findAllByTestId('history-row');
    await fireEvent.click(within(trs[0]!).getByRole('button', { name: 'Compare strategies' }));
    const view = await screen.findByTestId('replay');
    await fireEvent.click(within(view).getByLabelText('masking'));
    await fireEvent.click(within(view).getByLabelText('v2'));
    await fireEvent.click(within(view).getByRole('button', { name: 'Compare' }));
    expect(m.api.replayInvestigation).toHaveBeenCalledWith(2, ['v1', 'v2.1'], expect.any(Function));
    m.sinks.replay!({ type: 'error', message: 'the history never went over the trigger (1392 tokens): nothing would have been compacted' });
    expect((await within(view).findByRole('alert')).textContent).toContain('never went over the trigger');
    expect((within(view).getByRole('button', { name: 'Compare' }) as HTMLButtonElement).disabled).toBe(false);
  });

  it('exports an investigation as a scenario with the probes written, and shows where it went and what was left out', async () => {
    const m = mockApi({ listInvestigations: vi.fn(async () => rows) });
    render(HistoryList, { api: m.api });
    const trs = await screen.findAllByTestId('history-row');
    await fireEvent.click(within(trs[1]!).getByRole('button', { name: 'Compare strategies' }));
    const box = within(await screen.findByTestId('replay-export'));
    await fireEvent.input(box.getByLabelText('Probe 1: question'), { target: { value: 'Who commands the incident?' } });
    await fireEvent.input(box.getByLabelText('Probe 1: expected answer'), { target: { value: 'Yusuf Adeyemi' } });
    await fireEvent.click(box.getByRole('button', { name: 'Add a probe' }));
    await fireEvent.click(box.getByRole('button', { name: 'Add a probe' }));
    // Three probes at most.
    expect((box.getByRole('button', { name: 'Add a probe' }) as HTMLButtonElement).disabled).toBe(true);
    await fireEvent.click(box.getByRole('button', { name: 'Export' }));
    expect(m.api.exportInvestigation).toHaveBeenCalledWith(1, [
      { question: 'Who commands the incident?', answer: 'Yusuf Adeyemi' },
      { question: '', answer: '' },
      { question: '', answer: '' },
    ]);
    const said = await box.findByTestId('export-result');
    expect(said.textContent).toContain('/data/exports/scenarios/investigation-1.json');
    expect(said.textContent).toContain('8 of 31 messages, 2 probes');
    expect(said.textContent).toContain('bench-forgetting --scenarios /data/exports/scenarios');
    expect(box.getByText(/a next reply left out/)).toBeTruthy();
  });

  it('says why an export was refused', async () => {
    const m = mockApi({
      listInvestigations: vi.fn(async () => rows),
      exportInvestigation: vi.fn(async () => {
        throw { code: 'invalid_argument', message: 'investigation 2 never went over its compaction trigger: there is no point to cut it at' };
      }),
    });
    render(HistoryList, { api: m.api });
    const trs = await screen.findAllByTestId('history-row');
    await fireEvent.click(within(trs[0]!).getByRole('button', { name: 'Compare strategies' }));
    const box = within(await screen.findByTestId('replay-export'));
    await fireEvent.click(box.getByRole('button', { name: 'Export' }));
    expect((await box.findByRole('alert')).textContent).toContain('never went over its compaction trigger');
    expect(box.queryByTestId('export-result')).toBeNull();
  });
});
