import { describe, expect, it, vi } from 'vitest';
import { fireEvent, render, screen, within } from '@testing-library/svelte';
import HistoryList from '../src/lib/components/HistoryList.svelte';
import { ApiError, type InvestigationRow } from '../src/lib/api';
import { mockApi } from './fixtures';

const rows: InvestigationRow[] = [
  { id: 2, question: 'Who owns disk sdb?', status: 'interrupted', exit_reason: null, exit_kind: null, resumable: true, created: 1_764_750_000, events: 31 },
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
});
