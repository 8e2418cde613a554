import { afterEach, describe, expect, it } from 'vitest';
import { clearMocks, mockIPC } from '@tauri-apps/api/mocks';
import { ApiError, COMMANDS, PLUGIN_PERMISSIONS, tauriApi, toApiError } from '../src/lib/api';

afterEach(() => clearMocks());

describe('tauriApi', () => {
  it('invokes the named commands with camelCase arguments', async () => {
    const calls: [string, unknown][] = [];
    mockIPC((cmd, args) => {
      calls.push([cmd, args]);
      if (cmd === 'list_investigations') return [{ id: 1 }];
      return null;
    });
    expect(await tauriApi.listInvestigations()).toEqual([{ id: 1 }]);
    await tauriApi.approve(3, 'call_9', 'deadbeef', false);
    await tauriApi.approve(3, 'call_10', 'cafe', true, 'host');
    await tauriApi.undoCompaction(3, 4);
    await tauriApi.listDemoWorlds();
    await tauriApi.exportBenchmark('run-1', 'json');
    expect(calls).toEqual([
      ['list_investigations', {}],
      ['approve_tool_call', { id: 3, callId: 'call_9', argumentsHash: 'deadbeef', approved: false }],
      ['approve_tool_call', { id: 3, callId: 'call_10', argumentsHash: 'cafe', approved: true, scope: 'host' }],
      ['undo_compaction', { id: 3, round: 4 }],
      ['list_demo_worlds', {}],
      ['export_benchmark', { runId: 'run-1', format: 'json' }],
    ]);
  });

  it('streams channel events to the callback', async () => {
    mockIPC((cmd, args) => {
      if (cmd !== 'start_investigation') return null;
      // The shell sends to the channel's callback id, messages numbered from 0.
      const ch = (args as { onEvent: { id: number } }).onEvent;
      const internals = (window as unknown as { __TAURI_INTERNALS__: { runCallback: (id: number, m: unknown) => void } }).__TAURI_INTERNALS__;
      internals.runCallback(ch.id, { index: 1, message: { type: 'token', text: 'b' } });
      internals.runCallback(ch.id, { index: 0, message: { type: 'round', round: 1 } });
      return 5;
    });
    const got: unknown[] = [];
    expect(await tauriApi.startInvestigation('q', (e) => got.push(e))).toBe(5);
    await new Promise((r) => setTimeout(r, 0));
    // Out-of-order deliveries are put back in order by the Channel.
    expect(got).toEqual([{ type: 'round', round: 1 }, { type: 'token', text: 'b' }]);
  });

  it('starts a demo world by id and streams its events on a channel like an investigation', async () => {
    const calls: [string, unknown][] = [];
    mockIPC((cmd, args) => {
      calls.push([cmd, args]);
      const ch = (args as { onEvent: { id: number } }).onEvent;
      const internals = (window as unknown as { __TAURI_INTERNALS__: { runCallback: (id: number, m: unknown) => void } }).__TAURI_INTERNALS__;
      internals.runCallback(ch.id, { index: 0, message: { type: 'round', round: 1 } });
      return 9;
    });
    const got: unknown[] = [];
    expect(await tauriApi.startDemo('disk-owner', (e) => got.push(e))).toBe(9);
    await new Promise((r) => setTimeout(r, 0));
    expect(calls.map(([c, a]) => [c, (a as { world: string }).world])).toEqual([['start_demo', 'disk-owner']]);
    expect(got).toEqual([{ type: 'round', round: 1 }]);
  });

  it('turns a {code, message, details} rejection into an ApiError with field messages', async () => {
    mockIPC(() => {
      throw { code: 'invalid_settings', message: 'bad', details: { fields: { ratio: 'must be ≤ 1' } } };
    });
    const err = await tauriApi.saveSettings({} as never).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ApiError);
    expect((err as ApiError).code).toBe('invalid_settings');
    expect((err as ApiError).fieldMessages()).toEqual({ ratio: 'must be ≤ 1' });
  });

  it('names a string rejection as an internal error', () => {
    expect(toApiError('boom')).toMatchObject({ code: 'internal', message: 'boom' });
  });

  it('opens the native pickers through plugin:dialog|open: one .gguf file, or one folder', async () => {
    const calls: [string, unknown][] = [];
    mockIPC((cmd, args) => {
      calls.push([cmd, args]);
      const o = (args as { options: { directory: boolean } }).options;
      return o.directory ? '/srv/data' : '/models/m.gguf';
    });
    expect(await tauriApi.pickModelFile()).toBe('/models/m.gguf');
    expect(await tauriApi.pickFolder()).toBe('/srv/data');
    expect(calls).toEqual([
      ['plugin:dialog|open', { options: { directory: false, multiple: false, title: 'Choose a GGUF model', filters: [{ name: 'GGUF model', extensions: ['gguf'] }] } }],
      ['plugin:dialog|open', { options: { directory: true, multiple: false, title: 'Choose a workspace root' } }],
    ]);
    clearMocks();
    mockIPC(() => null);
    expect(await tauriApi.pickFolder()).toBeNull();
    clearMocks();
    mockIPC(() => {
      throw 'dialog: no display';
    });
    await expect(tauriApi.pickModelFile()).rejects.toMatchObject({ code: 'internal', message: 'dialog: no display' });
  });

  it('invokes exactly the commands listed in commands.json, each once, and only the granted plugin command', async () => {
    const seen = new Set<string>();
    const plugin = new Set<string>();
    mockIPC((cmd) => {
      if (cmd.startsWith('plugin:')) {
        plugin.add(cmd);
        return null;
      }
      seen.add(cmd);
      return cmd === 'list_investigations' || cmd === 'investigation_events' || cmd === 'list_models' || cmd === 'list_demo_worlds' || cmd === 'investigation_history' || cmd === 'pin_message'
        ? []
        : null;
    });
    const noop = () => {};
    const s = {} as never;
    await Promise.all([
      tauriApi.startInvestigation('q', noop),
      tauriApi.stopInvestigation(1),
      tauriApi.approve(1, 'c', 'h', true),
      tauriApi.listInvestigations(),
      tauriApi.investigationEvents(1),
      tauriApi.resumeInvestigation(1, noop),
      tauriApi.undoCompaction(1, 1),
      tauriApi.investigationHistory(1),
      tauriApi.pinMessage(1, 'm3', true, noop),
      tauriApi.compactInvestigation(1, null, null, noop),
      tauriApi.listDemoWorlds(),
      tauriApi.startDemo('w', noop),
      tauriApi.appInfo(),
      tauriApi.getSettings(),
      tauriApi.saveSettings(s),
      tauriApi.validateSettings(s),
      tauriApi.listServerModels('ollama', 'http://127.0.0.1:11434'),
      tauriApi.setApiKey(''),
      tauriApi.listModels(),
      tauriApi.pickModelFile(),
      tauriApi.pickFolder(),
      tauriApi.downloadRecommendedModel(noop),
      tauriApi.benchOptions(),
      tauriApi.runBenchmark(s, noop),
      tauriApi.cancelBenchmark('r'),
      tauriApi.exportBenchmark('r', 'json'),
      tauriApi.calibration(),
      tauriApi.calibrateModel(noop),
      tauriApi.replayInvestigation(1, ['v1'], noop),
      tauriApi.exportInvestigation(1, []),
      tauriApi.testMcpServers(s),
    ]);
    expect([...seen].sort()).toEqual([...COMMANDS].sort());
    expect(new Set(COMMANDS).size).toBe(COMMANDS.length);
    // plugin:<name>|<command> is granted by the permission <name>:allow-<command>.
    const needed = [...plugin].map((c) => c.replace(/^plugin:([a-z-]+)\|([a-z_]+)$/, (_, p: string, n: string) => `${p}:allow-${n.replace(/_/g, '-')}`));
    expect(needed.sort()).toEqual([...PLUGIN_PERMISSIONS].sort());
  });
});
