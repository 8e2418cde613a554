import { describe, expect, it } from 'vitest';
import { render, screen } from '@testing-library/svelte';
import { chartModel, DEFAULT_BOX, MIN_COLUMNS, type Box } from '../src/lib/chart';
import { applyEvent, emptyState } from '../src/lib/investigation';
import ContextChart from '../src/lib/components/ContextChart.svelte';
import type { AgentEvent } from '../src/lib/events';
import { compactionFinished, compactionStarted, gauge } from './fixtures';

// A plot area of 1200 × 100 px starting at (0, 0): columns 100 px apart, and
// a token count of the 1000-token context maps to y = 100 − tokens / 10.
const BOX: Box = { width: 1200, height: 100, left: 0, right: 0, top: 0, bottom: 0 };

function fold(events: AgentEvent[]) {
  const s = emptyState();
  for (const e of events) applyEvent(s, e);
  return s;
}

const g = (o: Parameters<typeof gauge>[0]) => gauge({ context: 1000, reserve: 200, threshold: 600, ...o });

describe('chartModel', () => {
  it('stacks each gauge’s zones as given, from the bottom: pinned, compressible, recent, free', () => {
    const s = fold([{ type: 'gauge', gauge: g({ pinned: 100, compressible: 250, recent: 50, free: 400 }) }]);
    const m = chartModel(s.samples, s.compactions, BOX);
    expect(m.max).toBe(1000);
    const col = m.columns[0]!;
    expect(col.segments.map((x) => [x.zone, x.value, x.y, x.h])).toEqual([
      ['pinned', 100, 90, 10],
      ['compressible', 250, 65, 25],
      ['recent', 50, 60, 5],
      ['free', 400, 20, 40],
    ]);
    // The reserve is the top band C − G … C; the threshold is the gauge's.
    expect([col.reserve.y, col.reserve.h]).toEqual([0, 20]);
    expect(col.thresholdY).toBe(40);
    expect(col.title).toContain('compressible 250');
  });

  it('draws counts the gauge carries even when they do not add up (no recomputation)', () => {
    // free is not C − G − zones here: the column shows it as sent.
    const s = fold([{ type: 'gauge', gauge: g({ pinned: 10, compressible: 20, recent: 30, free: 7 }) }]);
    const seg = chartModel(s.samples, [], BOX).columns[0]!.segments.find((x) => x.zone === 'free')!;
    expect(seg.value).toBe(7);
    expect(seg.h).toBeCloseTo(0.7);
  });

  it('puts a compaction’s drop between the last gauge before it and the first after, labelled from its event', () => {
    const s = fold([
      { type: 'gauge', gauge: g({ prompt_tokens: 350 }) },
      { type: 'round', round: 1 },
      { type: 'gauge', gauge: g({ prompt_tokens: 700 }) },
      { type: 'round', round: 3 },
      compactionStarted,
      { ...compactionFinished, tokens_before: 900, tokens_after: 402 } as AgentEvent,
      { type: 'gauge', gauge: g({ prompt_tokens: 300 }) },
    ]);
    const m = chartModel(s.samples, s.compactions, BOX);
    const slot = 1200 / MIN_COLUMNS;
    expect(m.columns.map((c) => c.round)).toEqual([0, 1, 3]);
    expect(m.drops).toHaveLength(1);
    const d = m.drops[0]!;
    expect(d.x).toBeCloseTo(2 * slot);
    expect(m.columns[1]!.x + m.columns[1]!.w).toBeLessThan(d.x);
    expect(m.columns[2]!.x).toBeGreaterThan(d.x);
    // The event's figures, not differences of gauges.
    expect(d.label).toBe('900 → 402');
    expect(d.yBefore).toBeCloseTo(10);
    expect(d.yAfter).toBeCloseTo(59.8);
    expect(m.rounds.map((t) => t.label)).toEqual(['start', 'R1', 'R3']);
  });

  it('skips a compaction that has not finished or failed, and steps the threshold line per gauge', () => {
    const s = fold([
      { type: 'gauge', gauge: g({ threshold: 600 }) },
      { type: 'round', round: 1 },
      compactionStarted,
      { type: 'gauge', gauge: g({ threshold: 500 }) },
    ]);
    const m = chartModel(s.samples, s.compactions, BOX);
    expect(m.drops).toEqual([]);
    // The running compaction is marked after the latest gauge.
    expect(m.pendingX).toBe(200);
    applyEvent(s, { type: 'compaction_failed', round: 3, message: 'pinned zone alone is over the threshold' });
    expect(chartModel(s.samples, s.compactions, BOX).pendingX).toBeNull();
    expect(m.thresholdPath).toBe('M0.0,40.0 L100.0,40.0 L100.0,50.0 L200.0,50.0');
  });

  it('has no columns or axis before the first gauge', () => {
    const m = chartModel([], [], DEFAULT_BOX);
    expect(m.columns).toEqual([]);
    expect(m.yTicks).toEqual([]);
  });
});

describe('ContextChart', () => {
  it('draws one column per gauge, the threshold, and each compaction as a labelled drop', () => {
    const s = fold([
      { type: 'gauge', gauge: g({ prompt_tokens: 350 }) },
      { type: 'round', round: 3 },
      compactionStarted,
      compactionFinished,
      { type: 'gauge', gauge: g({ prompt_tokens: 300 }) },
    ]);
    render(ContextChart, { samples: s.samples, compactions: s.compactions });
    expect(screen.getAllByTestId('chart-column').map((c) => c.getAttribute('data-round'))).toEqual(['0', '3']);
    expect(screen.getAllByTestId('chart-compressible')).toHaveLength(2);
    expect(screen.getByTestId('chart-threshold').getAttribute('d')).toMatch(/^M/);
    expect(screen.getAllByTestId('chart-drop-label').map((t) => t.textContent)).toEqual(['2,990 → 1,402']);
  });

  it('says it fills as the investigation runs when there is nothing yet', () => {
    render(ContextChart, { samples: [], compactions: [] });
    expect(screen.queryByTestId('context-chart')).toBeNull();
    expect(screen.getByText('The chart fills as the investigation runs.')).toBeTruthy();
  });
});
