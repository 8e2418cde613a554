// The UI's only door to the backend: typed wrappers over Tauri `invoke` and
// `Channel`. Components receive an `Api` as a prop, so tests hand them a mock
// and drive them with event sequences; the app hands them `tauriApi`.
//
// Command names and argument shapes are the contract with src-tauri. The
// shapes that come from the Rust crates (events, ledger rows, bench results)
// are rendered as given: the UI never recomputes token counts, zones,
// thresholds, means or brackets.

import { Channel, invoke } from '@tauri-apps/api/core';
import { open } from '@tauri-apps/plugin-dialog';
import type { AgentEvent } from './events';
import type { InvestigationRow } from './generated/events';
import type { Aggregates, BenchEvent, BenchRequest, Calibration } from './generated/bench-events';
import type { Scope } from './generated/events';
import commandList from './commands.json';
import { STRATEGIES, type EngineKind, type RunSettings as Settings, type SettingError } from './generated/settings';

// The shell's wire types are generated from its Rust types (src-tauri,
// test `typescript::app_types_are_current`): this file only calls.
import type { CommandError } from './generated/app';
export type {
  AppInfo,
  BenchOptions,
  CalibrationEvent,
  CommandError,
  DemoWorld,
  DownloadEvent,
  HandResult,
  MessageCard,
  ModelInfo,
  McpTestRow,
  ProbeText,
  ReplayEvent,
  RunCode,
  ScenarioExport,
} from './generated/app';
import type { AppInfo, BenchOptions, CalibrationEvent, DemoWorld, DownloadEvent, HandResult, MessageCard, McpTestRow, ModelInfo, ProbeText, ReplayEvent, ScenarioExport } from './generated/app';

/** An error thrown by every `Api` method when a command fails. */
export class ApiError extends Error {
  readonly code: string;
  readonly details: unknown;
  /** `details` may be left out (`null`), as the shell does when it has none. */
  constructor(e: Omit<CommandError, 'details'> & Partial<Pick<CommandError, 'details'>>) {
    super(e.message);
    this.name = 'ApiError';
    this.code = e.code;
    this.details = e.details ?? null;
  }

  /** Per-field messages when the shell sent `details: { fields: { name: message } }`. */
  fieldMessages(): Record<string, string> {
    const d = this.details as { fields?: Record<string, unknown> } | null | undefined;
    const out: Record<string, string> = {};
    if (d && typeof d === 'object' && d.fields && typeof d.fields === 'object') {
      for (const [k, v] of Object.entries(d.fields)) out[k] = String(v);
    }
    return out;
  }
}

/** Turns whatever `invoke` rejected with into an `ApiError`. */
export function toApiError(e: unknown): ApiError {
  if (e instanceof ApiError) return e;
  if (e && typeof e === 'object' && 'code' in e && 'message' in e) {
    const c = e as CommandError;
    return new ApiError({ code: String(c.code), message: String(c.message), details: c.details });
  }
  if (e instanceof Error) return new ApiError({ code: 'internal', message: e.message });
  return new ApiError({ code: 'internal', message: String(e) });
}

// ---------------------------------------------------------------- settings

// The settings are mf-agent's `RunSettings` (generated from the Rust type);
// mf-agent's resolver is their only validator (`validateSettings`).
export type { ApprovalMode, EngineKind, RunSettings as Settings, SettingError, ToolApprovals } from './generated/settings';
export { STRATEGIES };
export type StrategyName = (typeof STRATEGIES)[number];

/**
 * What the model download panel shows: the shell's events, or the error the
 * command failed with (the shell reports that as the command's error, not
 * as an event).
 */
export type DownloadState = DownloadEvent | { type: 'error'; message: string };

// ---------------------------------------------------------------- history

/** One stored investigation: mf-agent's `InvestigationRow`, generated. */
export type { InvestigationRow, SessionStatus } from './generated/events';

// ---------------------------------------------------------------- approvals

/**
 * Widens an answer beyond this one call: `host`, every call to the same host
 * for the rest of the session (approvals only); `tool`, every call of this
 * MCP server's tool, now and in later investigations (kept in the settings'
 * `mcp_approvals`; approve or deny).
 */
export type ApprovalScope = Exclude<Scope, 'call'>;

// ---------------------------------------------------------------- benchmark
//
// The bench computes every mean, spread and bracket; the panel only draws them.

/** Top of both score scales (keyword 0–3, judge 0–3). */
export const SCORE_MAX = 3;

// The benchmark's results and events are generated from mf-bench's Rust
// types (crates/mf-bench/src/events.rs, test `typescript_types_are_current`).
export type {
  Aggregates,
  BenchEvent,
  Brackets,
  Calibration,
  CalibrationRow,
  Cell,
  BenchRequest,
  ConditionSummary,
  JudgeRequest,
  ModelResult,
  Recommendation,
  ReplayPoint,
  ReplayResult,
  Stat,
} from './generated/bench-events';

/** group (class or dimension) → condition → mean. */
export type Table = Aggregates['by_class'];

// ---------------------------------------------------------------- the door

export interface Api {
  startInvestigation(question: string, onEvent: (e: AgentEvent) => void): Promise<number>;
  stopInvestigation(id: number): Promise<void>;
  /** `scope: 'host'` approves this call and every later one to the same host in this session. */
  approve(id: number, callId: string, argumentsHash: string, approved: boolean, scope?: ApprovalScope): Promise<void>;
  listInvestigations(): Promise<InvestigationRow[]>;
  investigationEvents(id: number): Promise<AgentEvent[]>;
  resumeInvestigation(id: number, onEvent: (e: AgentEvent) => void): Promise<number>;
  undoCompaction(id: number, round: number): Promise<void>;
  /** The stored history of a stopped investigation, one card per message (id, zone, pin). */
  investigationHistory(id: number): Promise<MessageCard[]>;
  /** Keeps a message verbatim (`pinned`) or lets it be compacted again; the `pin` event streams to `onEvent`. Returns its chain's ids. */
  pinMessage(id: number, message: string, pinned: boolean, onEvent: (e: AgentEvent) => void): Promise<string[]>;
  /**
   * Compacts a stopped investigation now (`upTo` null) or up to a message
   * (*summarise up to here*), with `strategy` or its own; the compaction's
   * events stream to `onEvent`.
   */
  compactInvestigation(id: number, upTo: string | null, strategy: string | null, onEvent: (e: AgentEvent) => void): Promise<HandResult>;
  listDemoWorlds(): Promise<DemoWorld[]>;
  /** Starts an investigation of a demo world; its events stream like `startInvestigation`'s. */
  startDemo(world: string, onEvent: (e: AgentEvent) => void): Promise<number>;
  appInfo(): Promise<AppInfo>;
  getSettings(): Promise<Settings>;
  saveSettings(settings: Settings): Promise<Settings>;
  /** Checks settings as a run would, without saving: every field that cannot be used (none: they would run). */
  validateSettings(settings: Settings): Promise<SettingError[]>;
  /** The models a server offers (the engine's URL), by name. */
  listServerModels(engine: EngineKind, url: string): Promise<string[]>;
  /** Keeps the OpenAI-compatible server's API key in the app's memory only (empty: forget it). */
  setApiKey(key: string): Promise<void>;
  listModels(): Promise<ModelInfo[]>;
  /** A native open dialog for one `.gguf` file; `null` when the user cancels. */
  pickModelFile(): Promise<string | null>;
  /** A native open dialog for one folder (a workspace root); `null` when the user cancels. */
  pickFolder(): Promise<string | null>;
  downloadRecommendedModel(onEvent: (e: DownloadEvent) => void): Promise<void>;
  benchOptions(): Promise<BenchOptions>;
  runBenchmark(request: BenchRequest, onEvent: (e: BenchEvent) => void): Promise<string>;
  cancelBenchmark(runId: string): Promise<void>;
  exportBenchmark(runId: string, format: 'json' | 'markdown'): Promise<string>;
  /** The calibration stored for the settings' model, if any. */
  calibration(): Promise<Calibration | null>;
  /** Calibrates the saved settings' engine and model; progress and the result stream to `onEvent`. */
  calibrateModel(onEvent: (e: CalibrationEvent) => void): Promise<void>;
  /**
   * Replays stored investigation `id` under each of `strategies` and scores
   * each by what the investigation really did next; progress and the result
   * stream to `onEvent` (minutes on the small test models).
   */
  replayInvestigation(id: number, strategies: string[], onEvent: (e: ReplayEvent) => void): Promise<void>;
  /** Writes the investigation as a scenario of the benchmark suite (into the exports folder); the user's probes first. */
  exportInvestigation(id: number, probes: ProbeText[]): Promise<ScenarioExport>;
  /** Starts the MCP servers of these (unsaved) settings and lists their tools. */
  testMcpServers(settings: Settings): Promise<McpTestRow[]>;
}

async function call<T>(cmd: string, args?: Record<string, unknown>): Promise<T> {
  try {
    return await invoke<T>(cmd, args);
  } catch (e) {
    throw toApiError(e);
  }
}

/**
 * The dialog plugin's `open` (`plugin:dialog|open`, the only plugin command
 * the capability grants): it shows the native picker and returns the chosen
 * path. The path is only text for the settings form, which validates it like
 * a typed one; the webview gets no file access from it.
 */
async function pick(options: { directory: boolean; title: string; filters?: { name: string; extensions: string[] }[] }): Promise<string | null> {
  try {
    const chosen = await open({ ...options, multiple: false });
    return typeof chosen === 'string' ? chosen : null;
  } catch (e) {
    throw toApiError(e);
  }
}

function channel<E>(onEvent: (e: E) => void): Channel<E> {
  const ch = new Channel<E>();
  ch.onmessage = onEvent;
  return ch;
}

/** The real backend: commands registered by src-tauri. */
export const tauriApi: Api = {
  startInvestigation: (question, onEvent) => call('start_investigation', { question, onEvent: channel(onEvent) }),
  stopInvestigation: (id) => call('stop_investigation', { id }),
  approve: (id, callId, argumentsHash, approved, scope) =>
    call('approve_tool_call', scope === undefined ? { id, callId, argumentsHash, approved } : { id, callId, argumentsHash, approved, scope }),
  listInvestigations: () => call('list_investigations'),
  investigationEvents: (id) => call('investigation_events', { id }),
  resumeInvestigation: (id, onEvent) => call('resume_investigation', { id, onEvent: channel(onEvent) }),
  undoCompaction: (id, round) => call('undo_compaction', { id, round }),
  investigationHistory: (id) => call('investigation_history', { id }),
  pinMessage: (id, message, pinned, onEvent) => call('pin_message', { id, message, pinned, onEvent: channel(onEvent) }),
  compactInvestigation: (id, upTo, strategy, onEvent) => call('compact_investigation', { id, upTo, strategy, onEvent: channel(onEvent) }),
  listDemoWorlds: () => call('list_demo_worlds'),
  startDemo: (world, onEvent) => call('start_demo', { world, onEvent: channel(onEvent) }),
  appInfo: () => call('app_info'),
  getSettings: () => call('get_settings'),
  saveSettings: (settings) => call('save_settings', { settings }),
  validateSettings: (settings) => call('validate_settings', { settings }),
  listServerModels: (engine, url) => call('list_server_models', { engine, url }),
  setApiKey: (key) => call('set_api_key', { key }),
  listModels: () => call('list_models'),
  pickModelFile: () => pick({ directory: false, title: 'Choose a GGUF model', filters: [{ name: 'GGUF model', extensions: ['gguf'] }] }),
  pickFolder: () => pick({ directory: true, title: 'Choose a workspace root' }),
  downloadRecommendedModel: (onEvent) => call('download_recommended_model', { onEvent: channel(onEvent) }),
  benchOptions: () => call('bench_options'),
  runBenchmark: (request, onEvent) => call('run_benchmark', { request, onEvent: channel(onEvent) }),
  cancelBenchmark: (runId) => call('cancel_benchmark', { runId }),
  exportBenchmark: (runId, format) => call('export_benchmark', { runId, format }),
  calibration: () => call('calibration'),
  calibrateModel: (onEvent) => call('calibrate_model', { onEvent: channel(onEvent) }),
  replayInvestigation: (id, strategies, onEvent) => call('replay_investigation', { id, strategies, onEvent: channel(onEvent) }),
  exportInvestigation: (id, probes) => call('export_investigation', { id, probes }),
  testMcpServers: (settings) => call('test_mcp_servers', { settings }),
};

/**
 * The command names `tauriApi` invokes. They live in commands.json so the
 * shell's sync test (src-tauri/src/lib.rs) can check them against
 * `generate_handler!` and the capability's permissions.
 */
export const COMMANDS: readonly string[] = commandList.commands;

/**
 * The plugin permissions the capability grants besides the app's commands
 * (`dialog:allow-open` for `plugin:dialog|open`); also in commands.json and
 * checked by the same sync test.
 */
export const PLUGIN_PERMISSIONS: readonly string[] = commandList.plugin_permissions;
