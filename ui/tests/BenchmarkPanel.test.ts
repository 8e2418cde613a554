import { describe, expect, it } from 'vitest';
import { fireEvent, render, screen, within } from '@testing-library/svelte';
import { flushSync } from 'svelte';
import BenchmarkPanel from '../src/lib/components/BenchmarkPanel.svelte';
import type { BenchSummary } from '../src/lib/api';
import { mockApi } from './fixtures';

const summary: BenchSummary = {
  max: 3,
  by_class: [
    { group: 'lookup', condition: 'baseline', mean: 1.5, low: 1.2, high: 1.8, n: 4 },
    { group: 'lookup', condition: 'v1', mean: 2.4, low: 2.1, high: 2.7, n: 4 },
  ],
  by_dimension: [{ group: 'entity', condition: 'v1', mean: 0.75, low: 0.3, high: 1.2, n: 4 }],
  judge_controls: [
    { name: 'identical', mean: 2.9, low: 2.8, high: 3, n: 3, expected_low: 2.7, expected_high: 3, passed: true },
    { name: 'contradiction', mean: 1.9, low: 1.5, high: 2.3, n: 3, expected_low: 0, expected_high: 0.6, passed: false },
  ],
};

describe('BenchmarkPanel', () => {
  it('runs the chosen selection and renders progress, rows, bars with brackets and judge controls', async () => {
    const m = mockApi();
    render(BenchmarkPanel, { api: m.api });
    const gemma = (await screen.findByLabelText(/gemma-3-270m/)) as HTMLInputElement;
    await fireEvent.click(gemma);
    await fireEvent.click(screen.getByRole('button', { name: 'Run benchmark' }));
    expect(m.api.runBenchmark).toHaveBeenCalledWith(
      { models: ['SmolLM2-135M-Instruct.Q4_1.gguf', 'gemma-3-270m-q4_k_m.gguf'], scenarios: ['lookup-short'], conditions: ['baseline', 'v1'], scorers: ['keyword', 'judge'], reps: 1 },
      expect.any(Function),
    );
    const send = (e: Parameters<NonNullable<typeof m.sinks.bench>>[0]) => {
      m.sinks.bench?.(e);
      flushSync();
    };
    send({ type: 'started', run_id: 'run-1', total: 8 });
    send({ type: 'progress', done: 3, total: 8, current: 'lookup-short × v1' });
    expect(screen.getByTestId('bench-progress').textContent).toBe('3 / 8 · lookup-short × v1');
    expect((screen.getByRole('button', { name: 'Run benchmark' }) as HTMLButtonElement).disabled).toBe(true);
    send({ type: 'result', row: { model: 'SmolLM2', scenario: 'lookup-short', class: 'lookup', condition: 'v1', scorer: 'judge', rep: 1, score: 2.5 } });
    expect(within(screen.getByTestId('bench-results')).getAllByRole('row')).toHaveLength(2);
    send({ type: 'finished', summary });

    const byClass = screen.getByTestId('chart-by class');
    const bars = byClass.querySelectorAll<HTMLElement>('.bar');
    expect([...bars].map((b) => b.style.width)).toEqual(['50%', '80%']);
    const bracket = byClass.querySelector<HTMLElement>('.bracket')!;
    expect(bracket.style.left).toBe('40%');
    expect(bracket.style.width).toBe('calc(20%)');
    const controls = within(screen.getByTestId('judge-controls')).getAllByRole('row');
    expect(controls[2]?.textContent).toContain('OUT OF RANGE');
    expect(controls[1]?.textContent).toContain('calibrated');

    await fireEvent.click(screen.getByRole('button', { name: 'Export Markdown' }));
    expect(m.api.exportBenchmark).toHaveBeenCalledWith('run-1', 'markdown');
    expect((await screen.findByTestId('exported')).textContent).toBe('Written to /tmp/bench.md');
  });

  it('cancels a running benchmark and refuses bad repetitions', async () => {
    const m = mockApi();
    render(BenchmarkPanel, { api: m.api });
    await screen.findByLabelText(/gemma-3-270m/);
    await fireEvent.input(screen.getByLabelText('Repetitions'), { target: { value: '0' } });
    expect(screen.getByText('Repetitions must be a whole number from 1 to 100.')).toBeTruthy();
    expect((screen.getByRole('button', { name: 'Run benchmark' }) as HTMLButtonElement).disabled).toBe(true);
    await fireEvent.input(screen.getByLabelText('Repetitions'), { target: { value: '2' } });
    await fireEvent.click(screen.getByRole('button', { name: 'Run benchmark' }));
    await fireEvent.click(screen.getByRole('button', { name: 'Cancel' }));
    expect(m.api.cancelBenchmark).toHaveBeenCalledWith('run-1');
    m.sinks.bench?.({ type: 'cancelled' });
    flushSync();
    expect(screen.getByRole('status').textContent).toBe('Cancelled.');
    expect((screen.getByRole('button', { name: 'Run benchmark' }) as HTMLButtonElement).disabled).toBe(false);
  });
});
