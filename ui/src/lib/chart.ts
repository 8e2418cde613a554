// The context chart's geometry: every `gauge` event becomes a column of
// stacked zones, every finished compaction a drop labelled with the token
// counts its event carries. The figures are the events'; the only arithmetic
// here is layout (stacking heights and placing things on a pixel grid).

import type { CompactionView, ContextSample } from './investigation';
import { fmt } from './investigation';

export const ZONES = ['pinned', 'compressible', 'recent', 'free'] as const;
export type Zone = (typeof ZONES)[number];

export interface Box {
  width: number;
  height: number;
  /** Room for the axis labels on the left, the round labels below, the drop labels above. */
  left: number;
  right: number;
  top: number;
  bottom: number;
}

export const DEFAULT_BOX: Box = { width: 480, height: 210, left: 40, right: 8, top: 30, bottom: 22 };

/** Columns shown at least: the first rounds do not fill the width with three fat bars. */
export const MIN_COLUMNS = 12;

export interface Segment {
  zone: Zone;
  /** Tokens, as the gauge gave them. */
  value: number;
  y: number;
  h: number;
}

export interface Column {
  index: number;
  round: number;
  x: number;
  w: number;
  segments: Segment[];
  /** The generation reserve, drawn as the top band `C − G … C`. */
  reserve: { value: number; y: number; h: number };
  /** y of this gauge's compaction threshold. */
  thresholdY: number;
  /** What a hover shows: every count of the gauge. */
  title: string;
}

export interface Drop {
  round: number;
  /** Where the compaction happened: between the last gauge before it and the first after. */
  x: number;
  yBefore: number;
  yAfter: number;
  label: string;
  /** Label row (alternates when two drops are close, so labels do not overlap). */
  row: number;
}

export interface Tick {
  x: number;
  label: string;
}

export interface ChartModel {
  box: Box;
  /** The top of the y axis: the largest context size `C` among the gauges. */
  max: number;
  columns: Column[];
  /** A step line through each column's threshold. */
  thresholdPath: string;
  drops: Drop[];
  /** Where a compaction that has started but not ended is marked (after the latest gauge); null when none is running. */
  pendingX: number | null;
  rounds: Tick[];
  yTicks: { y: number; label: string }[];
}

const short = (n: number): string => (n >= 10000 ? `${Math.round(n / 1000)}k` : n >= 1000 ? `${(n / 1000).toFixed(1)}k` : String(n));

export function chartModel(samples: ContextSample[], compactions: CompactionView[], box: Box = DEFAULT_BOX): ChartModel {
  const plotW = box.width - box.left - box.right;
  const plotH = box.height - box.top - box.bottom;
  const bottom = box.top + plotH;
  const max = samples.reduce((m, s) => Math.max(m, s.gauge.context), 0);
  const y = (tokens: number): number => (max > 0 ? bottom - (Math.min(tokens, max) / max) * plotH : bottom);
  const slot = plotW / Math.max(samples.length, MIN_COLUMNS);
  const w = Math.max(1, slot * 0.72);

  const columns: Column[] = samples.map((s, index) => {
    const g = s.gauge;
    const x = box.left + index * slot + (slot - w) / 2;
    let base = 0;
    const segments = ZONES.map((zone) => {
      const value = g[zone];
      const top = y(base + value);
      const seg = { zone, value, y: top, h: y(base) - top };
      base += value;
      return seg;
    });
    const reserveTop = y(g.context);
    return {
      index,
      round: s.round,
      x,
      w,
      segments,
      reserve: { value: g.reserve, y: reserveTop, h: y(g.context - g.reserve) - reserveTop },
      thresholdY: y(g.threshold),
      title:
        `${s.round === 0 ? 'before round 1' : `round ${s.round}`}: prompt ${fmt(g.prompt_tokens)} tokens, threshold ${fmt(g.threshold)}\n` +
        `pinned ${fmt(g.pinned)} · compressible ${fmt(g.compressible)} · recent ${fmt(g.recent)} · free ${fmt(g.free)} · reserve ${fmt(g.reserve)}`,
    };
  });

  const thresholdPath = columns
    .map((c, i) => {
      const x0 = box.left + i * slot;
      return `${i === 0 ? 'M' : 'L'}${x0.toFixed(1)},${c.thresholdY.toFixed(1)} L${(x0 + slot).toFixed(1)},${c.thresholdY.toFixed(1)}`;
    })
    .join(' ');

  const drops: Drop[] = [];
  for (const c of compactions) {
    if (!c.finished || c.at === null || c.at === 0 || c.at > samples.length) continue;
    const prev = drops[drops.length - 1];
    const x = box.left + c.at * slot;
    drops.push({
      round: c.round,
      x,
      yBefore: y(c.finished.tokens_before),
      yAfter: y(c.finished.tokens_after),
      label: `${fmt(c.finished.tokens_before)} → ${fmt(c.finished.tokens_after)}`,
      row: prev && x - prev.x < 110 ? 1 - prev.row : 0,
    });
  }

  const running = compactions.some((c) => c.started !== null && c.finished === null && c.failed === null);
  const pendingX = running && samples.length > 0 ? box.left + samples.length * slot : null;

  const rounds: Tick[] = [];
  let lastX = -Infinity;
  samples.forEach((s, i) => {
    if (i > 0 && samples[i - 1]?.round === s.round) return;
    const x = box.left + i * slot + slot / 2;
    if (x - lastX < 22) return;
    rounds.push({ x, label: s.round === 0 ? 'start' : `R${s.round}` });
    lastX = x;
  });

  const yTicks = max > 0 ? [0, 0.25, 0.5, 0.75, 1].map((f) => ({ y: y(max * f), label: short(Math.round(max * f)) })) : [];

  return { box, max, columns, thresholdPath, drops, pendingX, rounds, yTicks };
}
