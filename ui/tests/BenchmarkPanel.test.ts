import { describe, expect, it, vi } from 'vitest';
import { fireEvent, render, screen, within } from '@testing-library/svelte';
import { flushSync } from 'svelte';
import BenchmarkPanel from '../src/lib/components/BenchmarkPanel.svelte';
import type { BenchEvent } from '../src/lib/api';
import { mockApi, modelResult } from './fixtures';

async function running() {
  const m = mockApi();
  render(BenchmarkPanel, { api: m.api });
  await screen.findByLabelText(/gemma-3-270m/);
  const send = (e: BenchEvent) => {
    m.sinks.bench?.(e);
    flushSync();
  };
  return { ...m, send };
}

describe('BenchmarkPanel', () => {
  it('runs the chosen selection and shows progress, then each model result as the bench gave it', async () => {
    const { api, send } = await running();
    await fireEvent.click(screen.getByLabelText(/gemma-3-270m/));
    await fireEvent.click(screen.getByRole('button', { name: 'Run benchmark' }));
    expect(api.runBenchmark).toHaveBeenCalledWith(
      { models: ['SmolLM2-135M-Instruct.Q4_1.gguf', 'gemma-3-270m-q4_k_m.gguf'], scenarios: ['lookup-short'], conditions: ['baseline', 'v1'], scorers: ['keyword', 'judge'], reps: 1 },
      expect.any(Function),
    );
    const now = vi.spyOn(Date, 'now').mockReturnValue(1_000_000);
    send({ type: 'started', run_id: 'run-1', total: 8 });
    // A quarter of the work (not of the steps) in 10 s: 30 s left.
    now.mockReturnValue(1_010_000);
    send({ type: 'progress', done: 3, total: 8, label: 'lookup-short × v1 × rep 0', work_done: 30, work_total: 120 });
    expect(screen.getByTestId('bench-progress').textContent).toBe('3 / 8 · lookup-short × v1 × rep 0 · about 30 s left');
    const bar = screen.getByTestId('bench-progress').parentElement!.querySelector('progress')!;
    expect([bar.value, bar.max]).toEqual([30, 120]);
    now.mockRestore();
    expect((screen.getByRole('button', { name: 'Run benchmark' }) as HTMLButtonElement).disabled).toBe(true);
    expect(screen.queryByRole('button', { name: 'Export JSON' })).toBeNull();

    send({ type: 'model_result', result: modelResult() });
    const result = screen.getByTestId('bench-result');
    const rows = within(within(result).getByTestId('bench-conditions')).getAllByRole('row');
    expect(rows[1]?.textContent).toContain('1.20 ± 0.30');
    expect(rows[1]?.textContent).toContain('1490 → 620');
    expect(rows[2]?.textContent).toContain('—');

    // Bars are the bench's means on the 0–3 scale; the control brackets sit on the same axis.
    const byClass = within(result).getByTestId('chart-by class');
    expect([...byClass.querySelectorAll<HTMLElement>('.bar')].map((b) => b.style.width)).toEqual(['25%', '50%', '50%', '80%']);
    const marks = [...byClass.querySelectorAll<HTMLElement>('.group:first-child .barrow:first-of-type .mark')];
    expect(marks.map((m) => [m.className.split(' ').find((c) => c !== 'mark' && !c.startsWith('svelte-')), m.style.left])).toEqual([
      ['identical', '100%'],
      ['paraphrase', '75%'],
      ['contradiction', '50%'],
      ['empty', '0%'],
    ]);
    expect(within(result).getByTestId('worst-cells').textContent).toContain('aggregation-01-long');

    send({ type: 'finished' });
    await fireEvent.click(screen.getByRole('button', { name: 'Export Markdown' }));
    expect(api.exportBenchmark).toHaveBeenCalledWith('run-1', 'markdown');
    expect((await screen.findByTestId('exported')).textContent).toBe('Written to /tmp/bench.md');
  });

  it('switches the charts and brackets to the judge, where the bench ran one', async () => {
    const { send } = await running();
    await fireEvent.click(screen.getByRole('button', { name: 'Run benchmark' }));
    send({ type: 'model_result', result: modelResult() });
    await fireEvent.click(screen.getByLabelText('judge', { selector: 'input[type=radio]' }));
    const byClass = screen.getByTestId('chart-by class');
    expect([...byClass.querySelectorAll<HTMLElement>('.bar')].map((b) => b.style.width)).toEqual(['10%']);
    expect(screen.getByTestId('brackets').textContent).toContain('contradiction 0.60');
    expect(screen.getByTestId('brackets').textContent).toContain('1 judge replies without a grade');

    send({ type: 'model_result', result: modelResult({ model: 'no-judge', judge: null, control_brackets: { keyword: {}, judge: {}, judge_unparsed: 0, probes: 0 } }) });
    const second = screen.getAllByTestId('bench-result')[1]!;
    expect((within(second).getByLabelText('judge', { selector: 'input[type=radio]' }) as HTMLInputElement).disabled).toBe(true);
    expect(within(second).getByTestId('brackets').textContent).toContain('none');
  });

  it('sends a judge on a server, and marks a judge whose brackets fail as not evidence', async () => {
    const { api, send } = await running();
    await fireEvent.change(screen.getByLabelText('Judge'), { target: { value: 'openai' } });
    expect((screen.getByRole('button', { name: 'Run benchmark' }) as HTMLButtonElement).disabled).toBe(true);
    await fireEvent.input(screen.getByLabelText('Judge server URL'), { target: { value: 'http://127.0.0.1:8080/v1' } });
    await fireEvent.input(screen.getByLabelText('Judge model'), { target: { value: 'qwen3-8b' } });
    await fireEvent.click(screen.getByRole('button', { name: 'Run benchmark' }));
    expect(api.runBenchmark).toHaveBeenCalledWith(
      expect.objectContaining({ judge: { engine: 'openai', url: 'http://127.0.0.1:8080/v1', model: 'qwen3-8b' } }),
      expect.any(Function),
    );
    const fails = modelResult();
    fails.control_brackets = { ...fails.control_brackets, judge_evidence: false };
    send({ type: 'model_result', result: fails });
    const result = screen.getByTestId('bench-result');
    expect(within(result).getByTestId('judge-not-evidence').textContent).toContain('not evidence');
    expect(within(within(result).getByTestId('bench-conditions')).getAllByRole('row')[0]?.textContent).toContain('judge mean ± sd (not evidence)');
  });

  it('cancels a running benchmark, shows its errors and refuses bad repetitions', async () => {
    const { api, send } = await running();
    await fireEvent.input(screen.getByLabelText('Repetitions'), { target: { value: '0' } });
    expect(screen.getByText('Repetitions must be a whole number from 1 to 100.')).toBeTruthy();
    expect((screen.getByRole('button', { name: 'Run benchmark' }) as HTMLButtonElement).disabled).toBe(true);
    await fireEvent.input(screen.getByLabelText('Repetitions'), { target: { value: '2' } });
    await fireEvent.click(screen.getByRole('button', { name: 'Run benchmark' }));
    await fireEvent.click(screen.getByRole('button', { name: 'Cancel' }));
    expect(api.cancelBenchmark).toHaveBeenCalledWith('run-1');
    send({ type: 'cancelled' });
    expect(screen.getByRole('status').textContent).toBe('Cancelled.');
    expect((screen.getByRole('button', { name: 'Run benchmark' }) as HTMLButtonElement).disabled).toBe(false);
    await fireEvent.click(screen.getByRole('button', { name: 'Run benchmark' }));
    send({ type: 'error', message: 'model file not found: x.gguf' });
    expect(screen.getByRole('status').textContent).toBe('model file not found: x.gguf');
  });

  it('does not let Cancel reach the previous run before the new run has its id', async () => {
    const { api, send } = await running();
    await fireEvent.click(screen.getByRole('button', { name: 'Run benchmark' }));
    send({ type: 'finished' });
    // The second run's id has not arrived yet.
    let resolve: (id: string) => void = () => {};
    vi.mocked(api.runBenchmark).mockImplementationOnce(async () => new Promise<string>((r) => (resolve = r)));
    await fireEvent.click(screen.getByRole('button', { name: 'Run benchmark' }));
    const cancel = screen.getByRole('button', { name: 'Cancel' }) as HTMLButtonElement;
    expect(cancel.disabled).toBe(true);
    resolve('run-2');
    await vi.waitFor(() => expect(cancel.disabled).toBe(false));
    await fireEvent.click(cancel);
    expect(api.cancelBenchmark).toHaveBeenLastCalledWith('run-2');
  });
});
