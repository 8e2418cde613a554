// Event sequences and a scriptable mock of the backend for component tests.
import { vi } from 'vitest';
import type {
  Api,
  BenchEvent,
  Calibration,
  CalibrationEvent,
  DownloadEvent,
  HandResult,
  MessageCard,
  ModelResult,
  ProbeText,
  ReplayEvent,
  ReplayResult,
  SettingError,
  Settings,
} from '../src/lib/api';
import type { AgentEvent, Gauge, PlanRow } from '../src/lib/events';

export function gauge(over: Partial<Gauge> = {}): Gauge {
  return { pinned: 300, compressible: 900, recent: 400, free: 2000, threshold: 2880, prompt_tokens: 1650, context: 4096, reserve: 512, messages: 9, ...over };
}

export const started: AgentEvent = {
  type: 'started',
  question: 'Which region has the most 5xx errors?',
  strategy: 'v2',
  model: 'SmolLM2-135M-Instruct',
  context: 4096,
  reserve: 512,
  threshold: 2880,
  tools: ['http_get', 'read_file'],
  resumed: false,
};

export const rows: PlanRow[] = [
  { id: 'm0', kind: 'system', zone: 'pinned', tier: 'keep', tokens: 210, influence: null, delta: null, chain: null, reason: 'pinned' },
  { id: 'm3', kind: 'tool_result', zone: 'compressible', tier: 'verbatim', tokens: 640, influence: 2.75, delta: null, chain: 'c2', reason: 'above the median influence' },
  { id: 'm4', kind: 'tool_error', zone: 'compressible', tier: 'drop', tokens: 120, influence: 0.1, delta: null, chain: null, reason: 'repeated error' },
  { id: 'm5', kind: 'tool_result', zone: 'compressible', tier: 'light', tokens: 300, influence: 0.9, delta: null, chain: null, reason: 'below the median' },
];

export const plan = {
  strategy: 'v2',
  messages: [
    { id: 'm0', tier: 'keep' },
    { id: 'm3', tier: 'verbatim', dimensions: { data: 0.8, causal: 0.25, task_reference: 1, entity: 0.5, temporal: 0, structural: 0.125 } },
    { id: 'm4', tier: 'drop', dimensions: { data: 0, causal: 0, task_reference: 0, entity: 0.1, temporal: 0, structural: 0 } },
    { id: 'm5', tier: 'light' },
  ],
};

export const compactionStarted: AgentEvent = {
  type: 'compaction_started',
  round: 3,
  strategy: 'v2',
  tokens_before: 2990,
  messages_before: 11,
  class: 'aggregation',
  rows,
  plan,
};

export const compactionFinished: AgentEvent = {
  type: 'compaction_finished',
  round: 3,
  tokens_before: 2990,
  tokens_after: 1402,
  messages_before: 11,
  messages_after: 6,
  summary_by: 'model',
  summary_model: 'gemma-3-270m-q4_k_m',
  fallback_reason: null,
  summary: 'eu-west has 412 5xx errors; us-east 77.',
  appended_to_live_cache: true,
  verbatim: ['m3'],
  summarised: ['m5'],
  masked: [],
  dropped: ['m4'],
  notes: ['budget repaired: one more message dropped'],
  report: {},
};

/** A whole investigation: two rounds with a tool call that asks, a compaction, an answer. */
export function investigationEvents(): AgentEvent[] {
  return [
    started,
    { type: 'gauge', gauge: gauge({ pinned: 300, compressible: 0, recent: 50, free: 3234, prompt_tokens: 350, messages: 2 }) },
    { type: 'round', round: 1 },
    { type: 'thinking_token', text: 'I should ' },
    { type: 'thinking_token', text: 'fetch the stats.' },
    { type: 'tool_call', call_id: 'call_1', name: 'http_get', arguments: { url: 'http://127.0.0.1:8080/errors' } },
    { type: 'approval_requested', call_id: 'call_1', name: 'http_get', arguments: '{"url":"http://127.0.0.1:8080/errors"}', args_sha256: 'ab12', summary: '' },
  ];
}

export function demoWorlds() {
  return [
    { id: 'disk-owner', title: 'Who owns the full disk?', question: 'Which host has a disk over 95 % full, and who owns it?', tools: 2 },
    { id: 'error-spike', title: 'Why did 5xx errors spike?', question: 'Which region has the most 5xx errors, and why?', tools: 4 },
  ];
}

export function mockApi(over: Partial<Api> = {}) {
  const sinks: {
    agent: ((e: AgentEvent) => void) | null;
    bench: ((e: BenchEvent) => void) | null;
    download: ((e: DownloadEvent) => void) | null;
    calibration: ((e: CalibrationEvent) => void) | null;
    replay: ((e: ReplayEvent) => void) | null;
  } = { agent: null, bench: null, download: null, calibration: null, replay: null };
  const settings: Settings = {
    engine: 'embedded',
    model_path: '/models/SmolLM2-135M-Instruct.Q4_1.gguf',
    server_url: '',
    server_model: '',
    server_tools_in_text: false,
    api_key_env: 'OPENAI_API_KEY',
    tool_grammar: true,
    context: 4096,
    reserve: 512,
    ratio: 0.8,
    recent: 4,
    strategy: 'v1',
    gamma: 1.5,
    delta: 'model',
    summary_pass: 'pinned_prefix',
    threads: 2,
    gpu: false,
    thinking: true,
    temperature: 0,
    seed: 0,
    safety_cap: null,
    max_result_chars: 4000,
    max_args_bytes: 8192,
    tool_approvals: { files: 'allow', http_get: 'ask', http_write: 'ask', code: 'deny' },
    workspace_roots: ['/work/data'],
    allowed_hosts: ['127.0.0.1:8080'],
    code: false,
  };
  const api = {
    startInvestigation: vi.fn(async (_q: string, on: (e: AgentEvent) => void) => {
      sinks.agent = on;
      return 7;
    }),
    stopInvestigation: vi.fn(async () => {}),
    approve: vi.fn(async () => {}),
    listInvestigations: vi.fn(async () => []),
    investigationEvents: vi.fn(async () => [] as AgentEvent[]),
    resumeInvestigation: vi.fn(async (id: number, on: (e: AgentEvent) => void) => {
      sinks.agent = on;
      return id;
    }),
    undoCompaction: vi.fn(async () => {}),
    investigationHistory: vi.fn(async (): Promise<MessageCard[]> => []),
    pinMessage: vi.fn(async (_id: number, message: string) => [message]),
    compactInvestigation: vi.fn(async (): Promise<HandResult> => ({ tokens_before: 0, tokens_after: 0, unchanged: null })),
    listDemoWorlds: vi.fn(async () => demoWorlds()),
    startDemo: vi.fn(async (_w: string, on: (e: AgentEvent) => void) => {
      sinks.agent = on;
      return 8;
    }),
    appInfo: vi.fn(async () => ({ version: '0.1.0', model_path: settings.model_path, notice: null, models_dir: '/models', settings_file: '/cfg/settings.json', run_code: { available: false, message: 'run_code unavailable: the code sandbox is unavailable, so code is not run: mf-sandbox not found beside measured-forgetting (looked in /opt/mf and its parent)' } })),
    getSettings: vi.fn(async () => structuredClone(settings)),
    saveSettings: vi.fn(async (s: Settings) => s),
    validateSettings: vi.fn(async (s: Settings) => checkSettings(s)),
    listServerModels: vi.fn(async () => ['qwen3:8b', 'llama3.2:3b']),
    setApiKey: vi.fn(async () => {}),
    listModels: vi.fn(async () => [
      { name: 'SmolLM2-135M-Instruct.Q4_1.gguf', path: '/models/SmolLM2-135M-Instruct.Q4_1.gguf', size_bytes: 98_000_000 },
      { name: 'gemma-3-270m-q4_k_m.gguf', path: '/models/gemma-3-270m-q4_k_m.gguf', size_bytes: 253_000_000 },
    ]),
    pickModelFile: vi.fn(async () => null),
    pickFolder: vi.fn(async () => null),
    downloadRecommendedModel: vi.fn(async (on: (e: DownloadEvent) => void) => {
      sinks.download = on;
    }),
    benchOptions: vi.fn(async () => ({
      models: ['SmolLM2-135M-Instruct.Q4_1.gguf', 'gemma-3-270m-q4_k_m.gguf'],
      scenarios: [
        { id: 'lookup-short', class: 'lookup' },
        { id: 'aggregation-long', class: 'aggregation' },
      ],
      conditions: ['baseline', 'v1'],
      scorers: ['keyword', 'judge'],
    })),
    runBenchmark: vi.fn(async (_r: unknown, on: (e: BenchEvent) => void) => {
      sinks.bench = on;
      return 'run-1';
    }),
    cancelBenchmark: vi.fn(async () => {}),
    exportBenchmark: vi.fn(async (_id: string, f: 'json' | 'markdown') => `/tmp/bench.${f === 'json' ? 'json' : 'md'}`),
    calibration: vi.fn(async (): Promise<Calibration | null> => null),
    calibrateModel: vi.fn(async (on: (e: CalibrationEvent) => void) => {
      sinks.calibration = on;
    }),
    replayInvestigation: vi.fn(async (_id: number, _s: string[], on: (e: ReplayEvent) => void) => {
      sinks.replay = on;
    }),
    testMcpServers: vi.fn(async () => [
      { name: 'everything', ok: true, message: 'running (process 4242)', tools: ['everything__echo', 'everything__get-sum'] },
      { name: 'broken', ok: false, message: 'cannot start /nonexistent/mcp-server: No such file or directory', tools: [] },
    ]),
    exportInvestigation: vi.fn(async (id: number, probes: ProbeText[]) => ({
      path: `/data/exports/scenarios/investigation-${id}.json`,
      messages: 8,
      transcript_messages: 31,
      probes: probes.filter((p) => p.question.trim() !== '').length + 1,
      notes: ['a next reply left out ("{\"name\": \"http\"…"…): none of its facts is held only by the middle of the history, so losing the middle cannot show'],
    })),
    ...over,
  } satisfies Api;
  return { api, sinks, settings };
}

/** One model's result in mf-bench's shape (figures invented for the tests). */
/**
 * A stand-in for the shell's `validate_settings` (mf-agent's resolver, whose
 * rules are tested in Rust): the handful of its messages these tests provoke,
 * word for word, so the panel is tested on what the shell sends.
 */
export function checkSettings(s: Settings): SettingError[] {
  const e: SettingError[] = [];
  const add = (field: string, message: string) => e.push({ field, message });
  if (s.engine !== 'embedded') {
    if (!/^https?:\/\/\S+$/.test(s.server_url.trim())) add('server_url', 'The server URL must start with http:// or https://.');
    if (s.server_model.trim() === '') add('server_model', 'Name the model the server should run.');
  } else if (!s.model_path.toLowerCase().endsWith('.gguf')) add('model_path', 'The model must be a .gguf file.');
  if (s.reserve >= s.context) add('reserve', `Generation reserve must be smaller than the context size (${s.context}).`);
  if (!(s.ratio > 0 && s.ratio <= 1)) add('ratio', 'Threshold ratio must be above 0 and at most 1.');
  const root = s.workspace_roots.find((r) => !r.startsWith('/'));
  if (root !== undefined) add('workspace_roots', `Workspace root "${root}" must be an absolute path.`);
  const host = s.allowed_hosts.find((h) => h.includes('/'));
  if (host !== undefined) add('allowed_hosts', `"${host}" is not a host name or address (no scheme, no path).`);
  return e;
}

/** The parts of a model result the panel does not show (rows, speed, settings). */
export function benchRecord(): Pick<ModelResult, 'scores' | 'controls' | 'compactions' | 'speed' | 'settings'> {
  return {
    scores: [],
    controls: [],
    compactions: [],
    speed: { calls: {}, probe_prefill_ratio: null, total_prefill_ratio: null, answers_shared: 0, grades_shared: 0, workers: 1, threads_per_worker: null },
    settings: {
      backend: 'llama.cpp', n_ctx: 4096, budget_context: 4608, budget_reserve: 512, budget_recent: 2, temperature: 0.1, answer_max_tokens: 96,
      thinking: 'off', probe_prompt: 'Based on our conversation above, answer concisely: ', reps: 1, scorers: ['keyword'], judge_model: null,
      evaluator_max_tokens: 64, summary_max_tokens: 256, withholding_budget: 0, scenarios_dir: 'scenarios/compaction', scenarios: [],
    },
  };
}

export function modelResult(over: Partial<ModelResult> = {}): ModelResult {
  const stat = (mean: number, sd: number, min: number, n: number) => ({ mean, sd, min, n });
  return {
    model: 'SmolLM2-135M-Instruct.Q4_1',
    overall: { baseline: 1.2, v1: 2.1 },
    by_class: { aggregation: { baseline: 0.75, v1: 1.5 }, lookup: { baseline: 1.5, v1: 2.4 } },
    by_dimension: { entity: { baseline: 1.2, v1: 3 } },
    conditions: [
      { condition: 'baseline', keyword: stat(1.2, 0.3, 0, 8), judge: stat(1.1, 0.2, 0, 8), tokens_before: 1490.4, tokens_after: 620.2, fallbacks: 0, empty_answers: 1, compaction_failures: 0, not_applied: 0 },
      { condition: 'v1', keyword: stat(2.1, 0.1, 1, 8), judge: null, tokens_before: 1490.4, tokens_after: 770.9, fallbacks: 2, empty_answers: 0, compaction_failures: 0, not_applied: 0 },
    ],
    judge: { overall: { baseline: 1.1 }, by_class: { lookup: { baseline: 0.3 } }, by_dimension: {} },
    control_brackets: { keyword: { identical: 3, paraphrase: 2.25, contradiction: 1.5, empty: 0 }, judge: { identical: 2.85, contradiction: 0.6 }, judge_unparsed: 1, probes: 4 },
    worst_cells: [{ scenario: 'aggregation-01-long', condition: 'baseline', keyword_mean: 0.5, keyword_min: 0, judge_mean: null, judge_min: null }],
    empty_by_budget: 0,
    wall_s: 93.4,
    ...benchRecord(),
    ...over,
  };
}

/** A stored calibration: two strategies at two ratios, v2 at 0.6 recommended. */
export function calibration(): Calibration {
  const row = (strategy: string, ratio: number, route_done: number, facts_kept: number, wall_s: number, retention: number | null = null) => ({
    strategy, ratio, rounds: route_done + 1, route_done, route_total: 6, compactions: 3, facts_fetched: 5, facts_kept, facts_in_answer: 0, exit: 'final_answer', wall_s,
    retention, retention_probes: retention === null ? 0 : 7,
  });
  return {
    model: 'SmolLM2-135M-Instruct.Q4_1',
    world: 'cdn-purge-storm',
    route_len: 6,
    n_ctx: 2048,
    reserve: 192,
    measured_at: 1_796_457_600,
    rows: [row('v1', 0.6, 6, 1, 60, 0.41), row('v1', 0.9, 6, 0, 55, 0.12), row('v2', 0.6, 6, 2, 62, 0.58), row('v2', 0.9, 4, 2, 40)],
    recommended: { strategy: 'v2', ratio: 0.6 },
    reason: 'v2 at ratio 0.6 kept the most by likelihood (R 0.58 over 7 probes: 1 is the uncompacted history, 0 pinned + recent only), got 6/6 calls along the route, 2 of 5 facts in its final context by keyword, 0 in its answer, in 62 s',
  };
}

/**
 * A replay of investigation 1 in mf-bench's shape (figures invented for the
 * tests): two points; v1 ran live; v2 keeps most, masking grew at point 2.
 */
export function replayResult(): ReplayResult {
  const iv = (value: number, lo: number, hi: number, n: number) => ({ value, lo, hi, n });
  const cond = (condition: string, r: [number, number, number] | null, grew = 0) => ({
    condition,
    retention: r ? iv(r[0], r[1], r[2], 5) : null,
    nll_facts: iv(1.5, 1.1, 1.9, 6),
    choice: null,
    probes: 6,
    grew,
  });
  const comp = (strategy: string, tokens_after: number, grew = false) => ({ strategy, tokens_after, messages_after: 9, compaction_ms: 4200, grew });
  return {
    model: 'SmolLM2-135M-Instruct.Q4_1',
    session: 1,
    question: 'Row count?',
    live_strategy: 'v1',
    transcript_messages: 31,
    context: 2048,
    reserve: 192,
    ratio: 0.75,
    recent: 2,
    threshold: 1392,
    outside: 140,
    score_ctx: 8192,
    points: [
      { at: 9, tokens: 1450, floor_messages: 4, targets: [9, 11, 30], compactions: [comp('masking', 1100), comp('v1', 700), comp('v2', 820)], retention: { full: iv(1, 1, 1, 3), baseline: iv(0, 0, 0, 3), masking: iv(0.4, 0.1, 0.7, 3), v1: iv(0.5, 0.2, 0.8, 3), v2: iv(0.7, 0.4, 0.9, 3) } },
      { at: 19, tokens: 1700, floor_messages: 4, targets: [19, 21, 30], compactions: [comp('masking', 1750, true), comp('v1', 760), comp('v2', 900)], retention: { full: iv(1, 1, 1, 2), baseline: iv(0, 0, 0, 2), masking: null, v1: iv(0.3, -0.1, 0.6, 2), v2: iv(0.6, 0.3, 0.9, 2) } },
    ],
    scores: [],
    likelihood: {
      margin: 0.1,
      probes: 6,
      no_signal: 1,
      chance: null,
      conditions: [cond('full', [1, 1, 1]), cond('baseline', [0, 0, 0]), cond('masking', [0.4, 0.1, 0.7], 3), cond('v1', [0.42, 0.12, 0.71]), cond('v2', [0.66, 0.41, 0.88])],
      by_class: {},
      by_dimension: {},
      paired: [],
    },
    wall_s: 312.4,
  };
}
