// A scripted stand-in for src-tauri. Its figures are invented for the
// browser test and the screenshots; they are not measurements.
import type { AgentEvent, Gauge } from '../src/lib/events';
import type { BenchEvent, Settings } from '../src/lib/api';

type Step = AgentEvent | { hold: string };

interface Internals {
  runCallback: (id: number, data: unknown) => void;
}

const internals = (): Internals => (window as unknown as { __TAURI_INTERNALS__: Internals }).__TAURI_INTERNALS__;

const g = (o: Partial<Gauge>): Gauge => ({
  pinned: 310,
  compressible: 0,
  recent: 0,
  free: 0,
  threshold: 1228,
  prompt_tokens: 0,
  context: 2048,
  reserve: 512,
  messages: 2,
  ...o,
});

function investigation(question: string): Step[] {
  return [
    { type: 'started', question, strategy: 'v1', model: 'SmolLM2-135M-Instruct.Q4_1', context: 2048, reserve: 512, threshold: 1228, tools: ['http', 'list_files', 'read_file', 'search_files'], resumed: false },
    { type: 'gauge', gauge: g({ recent: 42, prompt_tokens: 352, free: 1184 }) },
    { type: 'round', round: 1 },
    { type: 'thinking_token', text: 'The error counts are served by the local API; ' },
    { type: 'thinking_token', text: 'fetch them per region first.' },
    { type: 'tool_call', call_id: 'call_1', name: 'http', arguments: { url: 'http://127.0.0.1:8931/errors?status=5xx' } },
    {
      type: 'approval_requested',
      call_id: 'call_1',
      name: 'http',
      arguments: '{"url":"http://127.0.0.1:8931/errors?status=5xx"}',
      args_sha256: '5e0c1f7a',
      summary: 'GET 127.0.0.1:8931 · 10 bytes of query · status=5xx',
      host: '127.0.0.1:8931',
    },
    { hold: 'approval' },
    { type: 'approval_decided', call_id: 'call_1', approved: true, by: 'user' },
    { type: 'kv', round: 1, purpose: 'round', stats: { prompt_tokens: 352, reused: 0, decoded: 352, trimmed: 0, full_clear: false, prefill_ms: 1480, decode_ms: 610 }, completion_tokens: 38 },
    { type: 'tool_result', call_id: 'call_1', name: 'http', ok: true, error: null, content: '{"eu-west":412,"us-east":77,"ap-south":19, "samples": [ ... ]}', truncated: 'result cut from 9,412 to 2,000 characters' },
    { type: 'gauge', gauge: g({ compressible: 520, recent: 310, prompt_tokens: 1140, free: 396, messages: 4 }) },
    { type: 'round', round: 2 },
    { type: 'tool_call', call_id: 'call_2', name: 'read_file', arguments: { path: 'incidents/2026-11.md' } },
    { type: 'approval_decided', call_id: 'call_2', approved: true, by: 'policy' },
    { type: 'kv', round: 2, purpose: 'round', stats: { prompt_tokens: 1140, reused: 390, decoded: 750, trimmed: 0, full_clear: false, prefill_ms: 3200, decode_ms: 540 }, completion_tokens: 31 },
    { type: 'tool_result', call_id: 'call_2', name: 'read_file', ok: true, error: null, content: '# November incidents\n- eu-west LB misconfig 11-14 ...', truncated: null },
    { type: 'gauge', gauge: g({ compressible: 880, recent: 300, prompt_tokens: 1490, free: 46, messages: 6 }) },
    { type: 'round', round: 3 },
    {
      type: 'compaction_started',
      round: 3,
      strategy: 'v1',
      tokens_before: 1490,
      messages_before: 6,
      class: null,
      rows: [
        { id: 'm0', kind: 'system', zone: 'pinned', tier: 'keep', tokens: 268, influence: null, delta: null, chain: null, reason: 'system prompt is pinned' },
        { id: 'm1', kind: 'user', zone: 'pinned', tier: 'keep', tokens: 42, influence: null, delta: null, chain: null, reason: 'the question is pinned' },
        { id: 'm2', kind: 'tool_call', zone: 'compressible', tier: 'summarise', tokens: 61, influence: null, delta: null, chain: 'c2', reason: 'v1: into the summary' },
        { id: 'm3', kind: 'tool_result', zone: 'compressible', tier: 'summarise', tokens: 519, influence: null, delta: null, chain: 'c2', reason: 'v1: result cut to 400 characters, then summarised' },
        { id: 'm4', kind: 'tool_call', zone: 'recent', tier: 'keep', tokens: 48, influence: null, delta: null, chain: 'c4', reason: 'recent zone is kept verbatim' },
        { id: 'm5', kind: 'tool_result', zone: 'recent', tier: 'keep', tokens: 252, influence: null, delta: null, chain: 'c4', reason: 'recent zone is kept verbatim' },
      ],
      plan: { messages: [] },
    },
    { type: 'gauge', gauge: g({ compressible: 880, recent: 300, prompt_tokens: 1490, free: 46, messages: 6 }) },
    { hold: 'compacting' },
    { type: 'kv', round: 3, purpose: 'summary', stats: { prompt_tokens: 1530, reused: 1490, decoded: 40, trimmed: 0, full_clear: false, prefill_ms: 190, decode_ms: 1650 }, completion_tokens: 96 },
    {
      type: 'compaction_finished',
      round: 3,
      tokens_before: 1490,
      tokens_after: 770,
      messages_before: 6,
      messages_after: 5,
      summary_by: 'model',
      fallback_reason: null,
      summary: 'GET /errors?status=5xx returned per-region counts: eu-west 412, us-east 77, ap-south 19.',
      appended_to_live_cache: true,
      verbatim: [],
      summarised: ['m2', 'm3'],
      masked: [],
      dropped: [],
      notes: [],
      report: {},
    },
    { type: 'gauge', gauge: g({ compressible: 160, recent: 300, prompt_tokens: 770, free: 766, messages: 5 }) },
    { type: 'round', round: 4 },
    { type: 'token', text: 'eu-west has the most 5xx errors ' },
    { type: 'token', text: '(412), caused by the load-balancer change of 14 November.' },
    { type: 'kv', round: 4, purpose: 'round', stats: { prompt_tokens: 770, reused: 310, decoded: 460, trimmed: 0, full_clear: false, prefill_ms: 1900, decode_ms: 720 }, completion_tokens: 24 },
    {
      type: 'final_answer',
      text: '**eu-west** has the most 5xx errors (412), caused by the load-balancer change of 14 November.\n\n| region | 5xx |\n| --- | ---: |\n| eu-west | 412 |\n| us-east | 77 |\n| ap-south | 19 |\n\nSource: `GET /errors?status=5xx` and `incidents/2026-11.md`.',
    },
    { type: 'exit', reason: { kind: 'final_answer' }, rounds: 4, compactions: 1 },
  ];
}

/** The stored events of a run the app's end cut after two rounds. */
function interrupted(question: string): AgentEvent[] {
  const run = investigation(question).filter((st): st is AgentEvent => !('hold' in st));
  const cut = run.findIndex((e) => e.type === 'round' && e.round === 3);
  return run.slice(0, cut);
}

/** What `resume_investigation` streams after the replay: the cache loaded, one more round, the answer. */
function resumed(question: string): Step[] {
  return [
    { type: 'started', question, strategy: 'v1', model: 'SmolLM2-135M-Instruct.Q4_1', context: 2048, reserve: 512, threshold: 1228, tools: ['http', 'list_files', 'read_file', 'search_files'], resumed: true },
    { type: 'kv_restore', slot: 'file:sessions/2.kv', used: true, snapshot_tokens: 1160, prompt_tokens: 1172, matched_tokens: 1140, note: null },
    { type: 'gauge', gauge: g({ compressible: 520, recent: 342, prompt_tokens: 1172, free: 364, messages: 5 }) },
    { type: 'round', round: 3 },
    { type: 'kv', round: 3, purpose: 'round', stats: { prompt_tokens: 1172, reused: 1140, decoded: 32, trimmed: 0, full_clear: false, prefill_ms: 140, decode_ms: 700 }, completion_tokens: 22 },
    { type: 'token', text: 'us-east recovered after the rollback; eu-west is still the worst.' },
    { type: 'final_answer', text: 'us-east recovered after the rollback; **eu-west** is still the worst (412).' },
    { type: 'exit', reason: { kind: 'final_answer' }, rounds: 3, compactions: 0 },
  ];
}

/** The demo worlds offered in the empty state (titles and questions as the shell lists them). */
const DEMOS = [
  { id: 'error-spike', title: 'Why did 5xx errors spike?', question: 'Which region has the most 5xx errors, and why?', tools: 4 },
  { id: 'disk-owner', title: 'Who owns the full disk?', question: 'Which host has a disk over 95 % full, and who owns it?', tools: 2 },
  { id: 'release-notes', title: 'What broke in the last release?', question: 'Which change in release 4.2 made the checkout slower, and by how much?', tools: 3 },
];

const settings: Settings = {
  engine: 'embedded',
  model_path: 'models/SmolLM2-135M-Instruct.Q4_1.gguf',
  server_url: '',
  server_model: '',
  server_tools_in_text: false,
  api_key_env: 'OPENAI_API_KEY',
  tool_grammar: true,
  context: 2048,
  reserve: 512,
  ratio: 0.8,
  recent: 2,
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
  tool_approvals: { files: 'allow', http_get: 'ask', http_write: 'ask', code: 'ask' },
  workspace_roots: ['/work/main/scenarios/agentic'],
  allowed_hosts: ['127.0.0.1:8931'],
  code: false,
};

export class ScriptedShell {
  /** Every command received, for the browser test to check. */
  calls: [string, Record<string, unknown>][] = [];
  private steps: Step[] = [];
  private channel = 0;
  private index = 0;
  private pos = 0;
  /** The checkpoint the script waits at, if any. */
  holding: string | null = null;
  private approved = false;

  handle(cmd: string, args: Record<string, unknown>): unknown {
    this.calls.push([cmd, args]);
    switch (cmd) {
      case 'start_investigation':
        this.channel = (args.onEvent as { id: number }).id;
        this.steps = investigation(String(args.question));
        this.index = 0;
        this.pos = 0;
        setTimeout(() => this.pump(), 50);
        return 1;
      case 'list_demo_worlds':
        return DEMOS;
      case 'start_demo': {
        const world = DEMOS.find((d) => d.id === args.world);
        if (!world) throw { code: 'unknown_demo', message: `no demo world ${String(args.world)}` };
        this.channel = (args.onEvent as { id: number }).id;
        this.steps = investigation(world.question);
        this.index = 0;
        this.pos = 0;
        setTimeout(() => this.pump(), 50);
        return 3;
      }
      case 'resume_investigation':
        this.channel = (args.onEvent as { id: number }).id;
        this.steps = resumed('Is us-east still failing?');
        this.index = 0;
        this.pos = 0;
        setTimeout(() => this.pump(), 50);
        return args.id;
      case 'approve_tool_call':
        this.approved = args.approved === true;
        if (this.holding === 'approval') this.release();
        return null;
      case 'stop_investigation':
        return null;
      case 'undo_compaction':
        return null;
      case 'list_investigations':
        return [
          { id: 2, question: 'Is us-east still failing?', status: 'interrupted', exit_reason: null, exit_kind: null, resumable: true, created: 1764752400, events: 14 },
          { id: 1, question: 'Which region has the most 5xx errors?', status: 'finished', exit_reason: 'final answer', exit_kind: 'final_answer', resumable: false, created: 1764748800, events: 37 },
        ];
      case 'investigation_events':
        // The stored events: the script as it ran (id 1), or cut by the app's end after two rounds (id 2).
        if (args.id === 2) return interrupted('Is us-east still failing?');
        return investigation('Which region has the most 5xx errors?').filter((st): st is AgentEvent => !('hold' in st));
      case 'app_info':
        return { version: '0.1.0', model_path: settings.model_path, notice: null, models_dir: 'models', settings_file: 'settings.json', run_code: { available: true, message: 'run_code is offered (sandbox: scripted).' } };
      case 'get_settings':
        return structuredClone(settings);
      case 'save_settings':
        return args.settings;
      case 'validate_settings': {
        // A scripted answer for the one mistake the test makes (the real
        // resolver is mf-agent's, tested there): the window shows what the
        // backend says, under the field it names.
        const s = args.settings as Settings;
        return s.reserve >= s.context ? [{ field: 'reserve', message: `Generation reserve must be smaller than the context size (${s.context}).` }] : [];
      }
      case 'list_models':
        return [
          { name: 'SmolLM2-135M-Instruct.Q4_1.gguf', path: 'models/SmolLM2-135M-Instruct.Q4_1.gguf', size_bytes: 98_000_000 },
          { name: 'gemma-3-270m-q4_k_m.gguf', path: 'models/gemma-3-270m-q4_k_m.gguf', size_bytes: 253_000_000 },
        ];
      case 'bench_options':
        return {
          models: ['SmolLM2-135M-Instruct.Q4_1.gguf'],
          scenarios: [
            { id: 'lookup-01-short', class: 'lookup' },
            { id: 'aggregation-01-short', class: 'aggregation' },
          ],
          conditions: ['baseline', 'v1'],
          scorers: ['keyword', 'judge'],
        };
      case 'run_benchmark':
        this.bench((args.onEvent as { id: number }).id);
        return 'run-1';
      case 'export_benchmark':
        return `artifacts/bench-run-1.${args.format === 'json' ? 'json' : 'md'}`;
      default:
        throw { code: 'unknown_command', message: `the scripted shell has no ${cmd}` };
    }
  }

  private send(channel: number, message: unknown): void {
    internals().runCallback(channel, { index: this.index++, message });
  }

  private pump(): void {
    while (this.pos < this.steps.length) {
      const s = this.steps[this.pos];
      if (!s) break;
      if ('hold' in s) {
        this.holding = s.hold;
        return;
      }
      this.pos += 1;
      if (s.type === 'approval_decided' && s.by === 'user') s.approved = this.approved;
      this.send(this.channel, s);
      if (s.type === 'round' || s.type === 'gauge') {
        setTimeout(() => this.pump(), 30);
        return;
      }
    }
  }

  /** Lets the script go on past the checkpoint it holds at. */
  release(): void {
    if (this.holding === null) return;
    this.holding = null;
    this.pos += 1;
    setTimeout(() => this.pump(), 10);
  }

  private bench(channel: number): void {
    let i = 0;
    const send = (m: BenchEvent) => internals().runCallback(channel, { index: i++, message: m });
    const steps = ['lookup-01-short × baseline × rep 0', 'lookup-01-short × v1 × rep 0'];
    send({ type: 'started', run_id: 'run-1', total: steps.length });
    steps.forEach((label, k) => setTimeout(() => send({ type: 'progress', done: k + 1, total: steps.length, label, work_done: k + 1, work_total: steps.length }), 150 * (k + 1)));
    setTimeout(() => {
      const stat = (mean: number, sd: number, min: number, n: number) => ({ mean, sd, min, n });
      send({
        type: 'model_result',
        result: {
          model: 'SmolLM2-135M-Instruct.Q4_1',
          overall: { baseline: 1.25, v1: 2 },
          by_class: { lookup: { baseline: 1.25, v1: 2 } },
          by_dimension: { data: { baseline: 1, v1: 2.5 }, entity: { baseline: 1.5, v1: 1.5 } },
          conditions: [
            { condition: 'baseline', keyword: stat(1.25, 0, 0, 4), judge: stat(1, 0, 0, 4), tokens_before: 1490, tokens_after: 612, fallbacks: 0, empty_answers: 0, compaction_failures: 0, not_applied: 0 },
            { condition: 'v1', keyword: stat(2, 0, 1, 4), judge: stat(1.75, 0, 1, 4), tokens_before: 1490, tokens_after: 770, fallbacks: 0, empty_answers: 0, compaction_failures: 0, not_applied: 0 },
          ],
          judge: { overall: { baseline: 1, v1: 1.75 }, by_class: { lookup: { baseline: 1, v1: 1.75 } }, by_dimension: { data: { baseline: 1, v1: 2 } } },
          control_brackets: { keyword: { identical: 3, paraphrase: 2.5, contradiction: 1.75, empty: 0 }, judge: { identical: 3, paraphrase: 2.5, contradiction: 0.5, empty: 0 }, judge_unparsed: 0, probes: 4 },
          worst_cells: [{ scenario: 'lookup-01-short', condition: 'baseline', keyword_mean: 1.25, keyword_min: 0, judge_mean: 1, judge_min: 0 }],
          empty_by_budget: 0,
          wall_s: 41,
          scores: [],
          controls: [],
          compactions: [],
          speed: { calls: {}, probe_prefill_ratio: null, total_prefill_ratio: null, answers_shared: 0, grades_shared: 0, workers: 1, threads_per_worker: null },
          settings: {
            backend: 'llama.cpp', n_ctx: 4096, budget_context: 4608, budget_reserve: 512, budget_recent: 2, temperature: 0.1, answer_max_tokens: 96,
            thinking: 'off', probe_prompt: 'Based on our conversation above, answer concisely: ', reps: 1, scorers: ['keyword', 'judge'],
            judge_model: 'SmolLM2-135M-Instruct.Q4_1', evaluator_max_tokens: 64, summary_max_tokens: 256, withholding_budget: 0,
            scenarios_dir: 'scenarios/compaction', scenarios: ['lookup-01-short'],
          },
        },
      });
      send({ type: 'finished' });
    }, 150 * (steps.length + 1));
  }
}
