import { describe, expect, it } from 'vitest';
import { fireEvent, render, screen } from '@testing-library/svelte';
import ZoneGauge from '../src/lib/components/ZoneGauge.svelte';
import { gauge } from './fixtures';

describe('ZoneGauge', () => {
  it('renders each zone as its share of the context, the reserve and the threshold line', () => {
    render(ZoneGauge, { gauge: gauge({ pinned: 1024, compressible: 512, recent: 256, free: 1792, threshold: 2867, context: 4096, reserve: 512 }) });
    expect(screen.getByTestId('seg-pinned').style.width).toBe('25%');
    expect(screen.getByTestId('seg-compressible').style.width).toBe('12.5%');
    expect(screen.getByTestId('seg-recent').style.width).toBe('6.25%');
    expect(screen.getByTestId('seg-free').style.width).toBe('43.75%');
    expect(screen.getByTestId('seg-reserve').style.width).toBe('12.5%');
    expect(screen.getByTestId('threshold-line').style.left).toBe(`${(2867 / 4096) * 100}%`);
  });

  it('shows the counts the event carries, not sums of its own', () => {
    // Deliberately inconsistent figures: free is not C − G − zones, prompt is not their sum.
    render(ZoneGauge, { gauge: gauge({ pinned: 10, compressible: 20, recent: 30, free: 1234, prompt_tokens: 77, threshold: 2000, context: 4096, reserve: 100, messages: 5 }) });
    expect(screen.getByTestId('count-free').textContent).toBe('1,234');
    expect(screen.getByTestId('count-prompt').textContent).toBe('77');
    expect(screen.getByTestId('count-messages').textContent).toBe('5');
    expect(screen.getByTestId('forecast').textContent).toContain('passes 2,000 tokens (now 77)');
  });

  it("shows the agent's forecast as given, without computing one", () => {
    // 5 rounds is not tokens_left / mean: the gauge prints what the event says.
    const forecast = { tokens_left: 300, mean_tokens_per_round: 149.6, rounds_until_compaction: 5, window: 3 };
    render(ZoneGauge, { gauge: gauge({ prompt_tokens: 500, threshold: 800 }), forecast });
    expect(screen.getByTestId('forecast-rounds').textContent).toBe('Expected in 5 rounds (300 tokens left, +150 a round over the last 3).');
  });

  it('says nothing of rounds without a forecast', () => {
    render(ZoneGauge, { gauge: gauge({ prompt_tokens: 500, threshold: 800 }), forecast: null });
    expect(screen.queryByTestId('forecast-rounds')).toBeNull();
  });

  it('shows exact counts on hover', async () => {
    render(ZoneGauge, { gauge: gauge({ compressible: 12345, context: 32768 }) });
    const seg = screen.getByTestId('seg-compressible');
    expect(seg.getAttribute('title')).toBe('compressible: 12,345 tokens');
    await fireEvent.mouseEnter(seg);
    expect(screen.getByTestId('gauge-hover').textContent?.trim()).toBe('compressible: 12,345 tokens');
    await fireEvent.mouseEnter(screen.getByTestId('seg-reserve'));
    expect(screen.getByTestId('gauge-hover').textContent?.trim()).toBe('generation reserve: 512 tokens');
    await fireEvent.mouseLeave(screen.getByTestId('seg-reserve'));
    expect(screen.getByTestId('gauge-hover').textContent?.trim()).toBe('');
  });

  it('says when a compaction is running and when the prompt is over budget', () => {
    const { rerender } = render(ZoneGauge, { gauge: gauge({ free: 0 }), compacting: false });
    expect(screen.getByTestId('forecast').textContent).toContain('Over the budget');
    rerender({ gauge: gauge({ free: 0 }), compacting: true });
    expect(screen.getByTestId('forecast').textContent).toContain('Compacting now');
  });

  it('says there is nothing to show before the first measurement', () => {
    render(ZoneGauge, { gauge: null });
    expect(screen.getByText('No measurement yet.')).toBeTruthy();
    expect(screen.queryByTestId('gauge-bar')).toBeNull();
  });
});
