// Real-window test of the desktop app: the built Tauri binary (real shell,
// real mf-agent loop, real SmolLM2 through llama.cpp) in WebKitGTK, driven
// through tauri-driver + WebKitWebDriver by webdriverio. Run it under a
// display (scripts/e2e-app.sh wraps it in xvfb-run + dbus-run-session).
//
// What it does, as a person would:
//   1. investigation: SmolLM2 at context 1024 asks a JSON API this script
//      serves on 127.0.0.1:18931 (the world and prompts of
//      crates/mf-agent/tests/real.rs); the gauge moves, a compaction appears
//      in the timeline, its ledger opens;
//      on the stopped run a tool result is kept verbatim (pinned), the history
//      is summarised up to its last message and compacted now: both are in
//      the timeline as asked for by hand, the ledger says why the pinned
//      message stayed, and its card is unchanged after both;
//   2. history lists the run, and Resume continues it (a new model call), then Stop;
//      Compare strategies replays it under v1 and shows R in a table and a chart;
//   3. benchmark: one short scenario, two conditions, keyword scorer, from the
//      panel; the same run again, cancelled while it runs;
//   4. settings: the picker buttons, run_code's state, the model download
//      from a file served on 127.0.0.1, the shell's own validation message;
//   5. restart: the app is closed while an investigation waits for an
//      approval, opened again, and Resume loads the saved KV cache ("KV cache
//      loaded: N tokens not decoded again"; the next round decodes only its
//      new tokens);
//   6. a session started by `mf investigate` (strategy v1, C 2048) resumes in
//      the app with those stored settings, not the app's;
//   7. a demo world clicked in the empty state: tool calls, gauges, the chart;
//   8. a POST with a 4.6 kB body waits for approval, and the prompt's first
//      line says method, host, bytes and the first characters (scripted model);
//   9. an investigation on a real OpenAI-compatible server (llama-cpp-python
//      running SmolLM2, installed by scripts/setup.sh): gauges and the chart.
// Screenshots go to $MF_SCREENSHOTS (default <repo>/artifacts/screenshots/app).
//
// Environment: MF_APP_BIN (the binary; default $CARGO_TARGET_DIR/debug/measured-forgetting),
// MF_TAURI_DRIVER (default ~/.cache/measured-forgetting/tools/bin/tauri-driver).
import { spawn, execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { createHash } from 'node:crypto';
import { createServer } from 'node:http';
import { homedir, tmpdir, availableParallelism } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { remote } from 'webdriverio';
import { startTauriDriver } from './tauri-driver.mjs';

const here = dirname(fileURLToPath(import.meta.url));
const repo = resolve(here, '../..');
const target = process.env.CARGO_TARGET_DIR ?? join(repo, 'target');
const bin = resolve(process.env.MF_APP_BIN ?? join(target, 'debug/measured-forgetting'));
const driverBin = process.env.MF_TAURI_DRIVER ?? join(homedir(), '.cache/measured-forgetting/tools/bin/tauri-driver');
const out = resolve(process.env.MF_SCREENSHOTS ?? join(repo, 'artifacts/screenshots/app'));
const model = join(repo, 'models/SmolLM2-135M-Instruct.Q4_1.gguf');
const PORT = 18931;
const DRIVER_PORT = 4444;

for (const [what, p] of [['app binary', bin], ['tauri-driver', driverBin], ['SmolLM2 test model', model]]) {
  if (!existsSync(p)) {
    console.error(`error: ${what} not found at ${p}`);
    process.exit(2);
  }
}
if (!process.env.DISPLAY && !process.env.WAYLAND_DISPLAY) {
  console.error('error: no display; run scripts/e2e-app.sh (it starts Xvfb)');
  process.exit(2);
}
mkdirSync(out, { recursive: true });

// ------------------------------------------------------------ the JSON world
// The same pages as crates/mf-agent/tests/real.rs: the model's behaviour
// depends on the prompt's text, so the world, port and prompts match it.
const disks = [];
for (let i = 1; i <= 12; i++) {
  const used = i === 7 ? 97 : 30 + ((i * 7) % 60);
  const h = String(i).padStart(2, '0');
  disks.push({ host: `web-${h}`, device: 'sda', used_pct: used, mount: '/var/cache/images', model: 'Samsung PM883 960GB', serial: `S4${String(i).padStart(4, '0')}XYZ` });
}
const pages = {
  '/api/index.json': '{"endpoints": ["/api/disks.json", "/api/hosts/web-03.json", "/api/teams/storage.json"], "note": "Start with disks."}',
  // serde_json writes object keys sorted; the Rust test's page is that serialisation.
  '/api/disks.json': JSON.stringify({ disks: disks.map((d) => Object.fromEntries(Object.entries(d).sort(([a], [b]) => a.localeCompare(b)))) }),
  '/api/hosts/web-03.json': '{"host": "web-03", "role": "image cache", "owner_team": "storage", "team_url": "/api/teams/storage.json", "rack": "B7"}',
  '/api/teams/storage.json': '{"team": "storage", "lead": "Priya Raman", "oncall": "Tomas Berg"}',
};
const requested = [];
const api = createServer((req, res) => {
  requested.push(req.url);
  const body = pages[req.url];
  res.writeHead(body ? 200 : 404, { 'content-type': 'application/json', connection: 'close' });
  res.end(body ?? '{"error": "no such endpoint"}');
});
// The port is fixed (the prompts name it); mf-agent's real-model test uses it
// too, so wait (up to 5 minutes) while that test holds it.
for (let i = 0; ; i++) {
  try {
    await new Promise((ok, fail) => api.once('error', fail).listen(PORT, '127.0.0.1', ok));
    break;
  } catch (e) {
    api.removeAllListeners('listening');
    api.removeAllListeners('error');
    if (e.code !== 'EADDRINUSE' || i >= 300) throw e;
    if (i === 0) console.log(`port ${PORT} is busy; waiting for it`);
    await new Promise((r) => setTimeout(r, 1000));
  }
}

const SYSTEM =
  'You investigate by calling tools. Call exactly one tool per reply, for example:\n```json\n{"name": "http", "arguments": {"url": "http://127.0.0.1:18931/api/index.json"}}\n```\nWhen you have the facts, answer in one sentence.';
const QUESTION =
  'First call the http tool with url http://127.0.0.1:18931/api/disks.json, then call the http tool with url http://127.0.0.1:18931/api/hosts/web-03.json, then say who owns web-03.';

// ------------------------------------------------------------ a model to download
// The Download button fetches from MF_MODEL_DOWNLOAD_URL (the test-only
// override of the catalog, with its sha256) instead of Hugging Face: a
// 6 MiB file served here on 127.0.0.1, saved into models/ and removed at the end.
const DOWNLOAD_NAME = 'e2e-download.gguf';
const removeDownload = () => {
  for (const f of readdirSync(join(repo, 'models'))) if (f.startsWith(DOWNLOAD_NAME)) rmSync(join(repo, 'models', f), { force: true });
};
removeDownload();
const modelBytes = Buffer.concat([Buffer.from('GGUF'), Buffer.from(Array.from({ length: 6 << 20 }, (_, i) => (i * 7 + 3) % 251))]);
const modelSha = createHash('sha256').update(modelBytes).digest('hex');
const files = createServer((req, res) => {
  if (req.url !== `/${DOWNLOAD_NAME}`) return res.writeHead(404).end();
  res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': modelBytes.length, connection: 'close' });
  res.end(req.method === 'HEAD' ? undefined : modelBytes);
});
await new Promise((ok) => files.listen(0, '127.0.0.1', ok));
const downloadUrl = `http://127.0.0.1:${files.address().port}/${DOWNLOAD_NAME}`;

// ------------------------------------------------------------ app settings
const scratch = mkdtempSync(join(tmpdir(), 'mf-app-e2e-'));
const configDir = join(scratch, 'config');
const home = join(scratch, 'home');
mkdirSync(configDir, { recursive: true });
const initialSettings = {
  model_path: model,
  context: 1024,
  reserve: 128,
  ratio: 0.9,
  recent: 2,
  strategy: 'v2',
  gamma: 1.5,
  threads: availableParallelism(),
  gpu: false,
  thinking: false,
  // The steps below were written for SmolLM2's free-form calls; the demo
  // world step runs with the default (the grammar on).
  tool_grammar: false,
  // GET asks, so the run passes through the UI's approval (the shell's UiApprover).
  // code: deny, so run_code is not offered and the prompt stays the one
  // of mf-agent's real test (the settings step below switches it on).
  tool_approvals: { files: 'allow', http_get: 'ask', http_write: 'ask', code: 'deny' },
  workspace_roots: [],
  allowed_hosts: [`127.0.0.1:${PORT}`],
  system_prompt: SYSTEM,
  max_result_chars: 250,
};
const writeSettings = () => writeFileSync(join(configDir, 'settings.json'), JSON.stringify(initialSettings, null, 2));
writeSettings();

// ------------------------------------------------------------ driver + session
const env = { ...process.env, MF_CONFIG_DIR: configDir, MF_HOME: home, MF_ROOT: repo, MF_MODEL_DOWNLOAD_URL: downloadUrl, MF_MODEL_DOWNLOAD_SHA256: modelSha };
const driver = await startTauriDriver({ bin: driverBin, port: DRIVER_PORT, env });

/** A new app process in a new WebDriver session (the app starts with it). */
const launchApp = () =>
  remote({
    hostname: '127.0.0.1',
    port: DRIVER_PORT,
    logLevel: 'error',
    connectionRetryCount: 1,
    capabilities: { 'wdio:enforceWebDriverClassic': true, 'tauri:options': { application: bin } },
  });

let failures = 0;
function check(cond, what) {
  console.log(`  ${cond ? 'ok  ' : 'FAIL'} ${what}`);
  if (!cond) failures += 1;
}

const t0 = Date.now();
const secs = () => ((Date.now() - t0) / 1000).toFixed(1);
let browser;
try {
  browser = await launchApp();
  const b = browser;
  const shot = async (name) => {
    const path = join(out, `${name}.png`);
    try {
      await b.saveScreenshot(path);
    } catch {
      execFileSync('import', ['-window', 'root', path]);
    }
    console.log(`  shot ${path}`);
  };
  const text = async (sel) => ((await (await b.$(sel)).isExisting()) ? (await b.$(sel)).getText() : '');
  const num = (s) => Number(String(s).replace(/[^0-9]/g, '')) || 0;
  const tab = async (label) => (await (await b.$('nav')).$(`button=${label}`)).click();

  console.log(`app started (${secs()} s)`);
  const notice = await b.$('[data-testid="notice"]');
  await notice.waitForExist({ timeout: 20000 });
  check((await notice.getText()).includes('small test model'), 'the banner says the small test model is in use');

  // ---------------------------------------------------------- investigation
  console.log('investigation');
  await (await b.$('textarea[aria-label="Question"]')).setValue(QUESTION);
  await (await b.$('button=Investigate')).click();
  await (await b.$('[data-testid="started"]')).waitForExist({ timeout: 60000 });
  check((await text('[data-testid="started"]')).includes('context 1,024') || (await text('[data-testid="started"]')).includes('context 1024'), `started at C = 1024: ${await text('[data-testid="started"]')}`);
  const prompts = [num(await text('[data-testid="count-prompt"]'))];
  let sawCompacting = false;
  let approvals = 0;
  // Until the first compaction has finished (or the loop ends by itself);
  // then Stop: the rest of the run is not what this test is about.
  const deadline = Date.now() + 300000;
  const compacted = async () => (await b.$('[data-testid="compaction-tokens"]')).isExisting();
  const ended = async () => (await b.$('[data-testid="exit"]')).isExisting();
  while (Date.now() < deadline) {
    const p = num(await text('[data-testid="count-prompt"]'));
    if (p !== prompts[prompts.length - 1]) prompts.push(p);
    if (!sawCompacting && (await text('[data-testid="forecast"]')).includes('Compacting now')) {
      sawCompacting = true;
      await shot('02-gauge-compacting');
    }
    if ((await compacted()) || (await ended())) break;
    const approve = await b.$('button=Approve');
    if ((await approve.isExisting()) && (await approve.isEnabled())) {
      if (approvals === 0) await shot('00-approval');
      await approve.click();
      approvals += 1;
    }
    await b.pause(150);
  }
  const p = num(await text('[data-testid="count-prompt"]'));
  if (p !== prompts[prompts.length - 1]) prompts.push(p);
  console.log(`  prompt tokens seen: ${prompts.join(' → ')} (${secs()} s)`);
  check(sawCompacting, 'the gauge said "Compacting now" while the compaction ran');
  check(approvals >= 1, `tool calls waited for the user's approval and ran after it (${approvals} approved)`);
  if (!(await ended())) {
    await (await b.$('button=Stop')).click();
    await (await b.$('[data-testid="exit"]')).waitForExist({ timeout: 120000 });
  }
  check(await ended(), `the investigation ended (Stop): ${await text('[data-testid="exit"]')}`);
  check(prompts.length >= 3, 'the gauge moved (the prompt size changed at least twice)');
  check(requested.includes('/api/disks.json'), `the model fetched the disks from the loopback API (requests: ${requested.join(', ')})`);
  const compactions = await b.$$('[data-testid="compaction"]');
  check(compactions.length >= 1, `a compaction is in the timeline (${compactions.length})`);
  check(num(await text('[data-testid="count-context"]')) === 1024, 'the gauge shows C = 1024');
  await b.execute(() => window.scrollTo(0, 0));
  await shot('01-investigation');

  if (compactions.length >= 1) {
    const tokens = await text('[data-testid="compaction-tokens"]');
    const [before, after] = tokens.split('→').map(num);
    check(after < before, `the compaction shrank the prompt: ${tokens}`);
    await (await compactions[0].$('button')).click();
    const ledger = await b.$('[aria-label="Compaction ledger"]');
    await ledger.waitForExist({ timeout: 10000 });
    const rows = await b.$$('[data-testid="ledger-row"]');
    const fates = [];
    for (const r of rows) fates.push(await (await r.$('[data-testid="fate"]')).getText());
    check(rows.length >= 3, `the ledger lists the compressed messages (${rows.length} rows)`);
    check(fates.includes('kept') && fates.some((f) => f === 'summarised' || f === 'dropped'), `fates: ${fates.join(', ')}`);
    await (await b.$('[data-testid="ledger-summary"]')).scrollIntoView();
    await shot('03-ledger');
    // The loop has stopped: the compaction can be undone (history and KV cache restored by mf-agent).
    const undo = await b.$('button=Undo this compaction');
    await undo.waitForEnabled({ timeout: 10000 });
    await undo.click();
    await (await b.$('button=Restored')).waitForExist({ timeout: 60000 });
    check(true, 'undo of the compaction was accepted by the shell');
  }

  // ---------------------------------------------------------- compaction by hand
  // The run is stopped (its compaction undone): its stored history shows as
  // message cards. Keep the first tool result verbatim, summarise up to the
  // last message, compact now; the timeline holds both compactions as asked
  // for by hand, the ledger says why the pinned message stayed, and its card
  // is there unchanged after both. The resume below continues from them.
  console.log(`compaction by hand (${secs()} s)`);
  const cards = async () => b.$$('[data-testid="message-card"]');
  // In the middle of the page, where no sticky header covers it.
  const press = async (el) => {
    await el.scrollIntoView({ block: 'center' });
    await el.click();
  };
  await b.waitUntil(async () => (await cards()).length >= 4, { timeout: 20000, interval: 300 });
  const cardInfo = async (c) => ({ id: await c.getAttribute('data-id'), text: await (await c.$('.text')).getText(), kind: await (await c.$('.kind')).getText() });
  let pinned = null;
  for (const c of await cards()) {
    const info = await cardInfo(c);
    if (info.kind === 'tool-result' && (await (await c.$('[data-testid="pin"]')).isExisting())) {
      pinned = info;
      await press(await c.$('[data-testid="pin"]'));
      break;
    }
  }
  check(pinned !== null, `a tool result was pinned (${pinned?.id})`);
  const cardOf = async (id) => b.$(`[data-testid="message-card"][data-id="${id}"]`);
  const pinnedStill = async () => {
    const c = await cardOf(pinned?.id);
    if (!(await c.isExisting())) return false;
    return (await (await c.$('[data-testid="pinned-badge"]')).isExisting()) && (await (await c.$('.text')).getText()) === pinned.text;
  };
  if (pinned) await b.waitUntil(pinnedStill, { timeout: 10000, interval: 200 });
  check(await pinnedStill(), 'the card says the message is kept verbatim');
  check((await b.$$('[data-testid="pin-entry"]')).length >= 1, 'the pin is an entry of the ledger timeline');
  await (await cardOf(pinned?.id)).scrollIntoView();
  await shot('12-pinned');
  // Summarise up to the last message: everything after the question is
  // compacted for this once, the recent zone included, but the pinned chain.
  let upTo = null;
  for (const c of await cards()) {
    if (await (await c.$('[data-testid="summarise-up-to"]')).isExisting()) upTo = await cardInfo(c);
  }
  const byHandBefore = (await b.$$('[data-testid="by-hand"]')).length;
  const note = async () => text('[data-testid="hand-note"]');
  if (upTo) {
    await press(await (await cardOf(upTo.id)).$('[data-testid="summarise-up-to"]'));
    await b.waitUntil(async () => (await note()) !== '' || (await b.$('.error[role="alert"]').isExisting()), { timeout: 300000, interval: 500 });
  }
  check(upTo !== null, `a message to summarise up to (${upTo?.id})`);
  console.log(`  summarise up to ${upTo?.id}: ${await note()} ${await text('.error[role="alert"]')}`);
  check((await b.$$('[data-testid="by-hand"]')).length === byHandBefore + 1 && (await text('[data-testid="by-hand"]')).includes('summarise up to'), 'the timeline holds the compaction asked for by hand');
  check(await pinnedStill(), `the pinned message ${pinned?.id} survived "Summarise up to here"`);
  // Compact now.
  await press(await b.$('[data-testid="compact-now"]'));
  await b.waitUntil(async () => (await b.$$('[data-testid="by-hand"]')).length === byHandBefore + 2 || (await b.$('.error[role="alert"]').isExisting()), { timeout: 300000, interval: 500 });
  console.log(`  compact now: ${await note()} ${await text('.error[role="alert"]')}`);
  const byHand = await b.$$('[data-testid="by-hand"]');
  check(byHand.length === byHandBefore + 2 && (await byHand[byHand.length - 1].getText()).includes('compact now'), '"Compact now" is in the timeline too');
  check(await pinnedStill(), `the pinned message ${pinned?.id} survived "Compact now"`);
  // The ledger of the compaction up to a message: the pinned message's row says why it stayed.
  const entries = await b.$$('[data-testid="compaction"]');
  let ledgerReason = '';
  for (const e of entries) {
    if ((await e.getText()).includes('summarise up to')) {
      await press(await e.$('button'));
      await (await b.$('[data-testid="ledger-by-hand"]')).waitForExist({ timeout: 10000 });
      for (const r of await b.$$('[data-testid="ledger-row"]')) {
        const cells = await r.$$('td');
        if ((await cells[0].getText()) === pinned?.id) ledgerReason = `${await cells[2].getText()} · ${await (await r.$('.why')).getText()}`;
      }
      break;
    }
  }
  check(ledgerReason.startsWith('pinned · pinned by the user'), `the ledger puts ${pinned?.id} in the pinned zone, and says why: ${ledgerReason}`);
  await (await b.$('[aria-label="Compaction ledger"]')).scrollIntoView({ block: 'start' });
  await b.pause(300);
  await shot('13-ledger-by-hand');
  await (await cardOf(pinned?.id)).scrollIntoView();
  await shot('14-pinned-after-compactions');

  // ---------------------------------------------------------- history
  console.log('history');
  await tab('History');
  await (await b.$('[data-testid="history-row"]')).waitForExist({ timeout: 10000 });
  check((await text('[data-testid="history-row"]')).includes('First call the http tool'), 'history lists the stored investigation');

  // ---------------------------------------------------------- resume from history
  // The run was stopped (and its compaction undone): Resume continues it from
  // the stored history; the check is a new model call (a KV row) after the replay.
  console.log(`resume (${secs()} s)`);
  const resume = await (await b.$('[data-testid="history-row"]')).$('button=Resume');
  check(await resume.isEnabled(), 'Resume is offered for the stopped investigation');
  await resume.click();
  const stop = await b.$('button=Stop');
  await stop.waitForEnabled({ timeout: 30000 });
  const replayedKv = (await b.$$('[data-testid="kv-row"]')).length;
  const replayedRounds = (await b.$$('[data-testid="round"]')).length;
  check(replayedRounds >= 1 && replayedKv >= 1, `the stored run was replayed (${replayedRounds} rounds, ${replayedKv} model calls) and continues live`);
  await b.waitUntil(async () => (await b.$$('[data-testid="kv-row"]')).length > replayedKv || !(await stop.isEnabled()), { timeout: 180000, interval: 300 });
  const kvRows = await b.$$('[data-testid="kv-row"]');
  let resumedCall = 'none';
  if (kvRows.length > replayedKv) {
    const cells = await kvRows[replayedKv].$$('td');
    resumedCall = `prompt ${await cells[2].getText()}, reused ${await cells[3].getText()}, decoded ${await cells[4].getText()}`;
  }
  check(kvRows.length > replayedKv, `the resumed run made a new model call (${resumedCall}; ${secs()} s)`);
  await shot('06-resumed');
  if (await stop.isEnabled()) await stop.click();
  await b.waitUntil(async () => !(await stop.isEnabled()), { timeout: 120000, interval: 300 });
  check(!(await stop.isEnabled()), 'the resumed run stopped');

  // ---------------------------------------------------------- compare strategies
  // History → Compare strategies on an investigation that went on after it
  // crossed its trigger: `mf investigate` makes one in the app's store
  // (Gemma 3 with the tool grammar, C 1024, ratio 0.6, a round cap; greedy,
  // so the same every run).
  // The shell replays it under v1 (the others unchecked, to keep it short)
  // and scores what the run did next; the table and the chart come on screen.
  console.log(`compare strategies (${secs()} s)`);
  const COMPARE_QUESTION = `To compare: call the http tool with url http://127.0.0.1:${PORT}/api/index.json, then with http://127.0.0.1:${PORT}/api/disks.json, then with http://127.0.0.1:${PORT}/api/hosts/web-03.json, then with http://127.0.0.1:${PORT}/api/teams/storage.json, then say who leads the team that owns web-03.`;
  execFileSync(
    join(dirname(bin), 'mf'),
    ['investigate', '--model', join(repo, 'models/gemma-3-270m-q4_k_m.gguf'), '--ctx', '1024', '--reserve', '128', '--ratio', '0.6', '--strategy', 'v1', '--safety-cap', '6', '--approve', 'auto', '--tool-grammar', '--allow-host', `127.0.0.1:${PORT}`, '--system', SYSTEM, '--json', COMPARE_QUESTION],
    { env: { ...process.env, MF_HOME: home }, stdio: ['ignore', 'ignore', 'inherit'], timeout: 300000 },
  );
  await tab('Investigation');
  await tab('History');
  await b.waitUntil(async () => (await text('[data-testid="history-row"]')).includes('To compare'), { timeout: 10000, interval: 300 });
  await (await (await b.$('[data-testid="history-row"]')).$('button=Compare strategies')).click();
  const replay = await b.$('[data-testid="replay"]');
  await replay.waitForExist({ timeout: 10000 });
  for (const box of await replay.$$('input[type="checkbox"]')) {
    if ((await box.getAttribute('value')) !== 'v1' && (await box.isSelected())) await box.click();
  }
  await (await replay.$('button=Compare')).click();
  await b.waitUntil(async () => (await b.$('[data-testid="replay-table"]').isExisting()) || (await replay.$('[role="alert"]').isExisting()), {
    timeout: 600000,
    interval: 1000,
  });
  const replayError = (await replay.$('[role="alert"]').isExisting()) ? await (await replay.$('[role="alert"]')).getText() : '';
  check(replayError === '', `the comparison ran${replayError ? `: ${replayError}` : ''} (${secs()} s)`);
  const replayRows = await b.$$('[data-testid="replay-row"]');
  const conditions = [];
  for (const r of replayRows) conditions.push((await (await r.$('td')).getText()).split(/\s+/)[0]);
  check(conditions.join(',') === 'full,baseline,v1', `the table lists the ceiling, the floor and v1 (${conditions.join(', ')})`);
  check((await text('[data-testid="replay-summary"]')).includes('ran live with v1'), `the summary names the live strategy: ${await text('[data-testid="replay-summary"]')}`);
  await (await b.$('[data-testid="replay-table"]')).scrollIntoView();
  await shot('06b-compare-strategies');

  // ---------------------------------------------------------- benchmark
  console.log(`benchmark (${secs()} s)`);
  await tab('Benchmark');
  await (await b.$('button=Run benchmark')).waitForExist({ timeout: 20000 });
  const want = {
    'SmolLM2-135M-Instruct.Q4_1.gguf': true,
    'gemma-3-270m-q4_k_m.gguf': false,
    'lookup-short': true,
    baseline: true,
    v2: true,
    keyword: true,
    judge: false,
  };
  for (const box of await b.$$('section[aria-label="Benchmark"] input[type="checkbox"]')) {
    const v = await box.getAttribute('value');
    const on = want[v] === true;
    if ((await box.isSelected()) !== on) await box.click();
  }
  await (await b.$('button=Run benchmark')).click();
  const result = await b.$('[data-testid="bench-result"]');
  await result.waitForExist({ timeout: 300000, interval: 500 });
  check((await text('[data-testid="bench-progress"]')).startsWith('2 / 2'), `progress reached the end: ${await text('[data-testid="bench-progress"]')}`);
  const condRows = await b.$$('[data-testid="bench-conditions"] tbody tr');
  check(condRows.length === 2, `results for 2 conditions (${condRows.length})`);
  await (await b.$('button=Export JSON')).click();
  await (await b.$('[data-testid="exported"]')).waitForExist({ timeout: 10000 });
  const exported = (await text('[data-testid="exported"]')).replace('Written to ', '');
  const results = JSON.parse(readFileSync(exported, 'utf8'));
  check(Array.isArray(results) && results.length === 1 && results[0].scores.length > 0, `export wrote the results JSON (${exported})`);
  await shot('04-benchmark');
  console.log(`  benchmark done (${secs()} s)`);

  // ---------------------------------------------------------- benchmark cancel
  // The same selection again, cancelled while it runs: the panel says
  // Cancelled and shows no result table.
  await (await b.$('button=Run benchmark')).click();
  const cancel = await b.$('button=Cancel');
  await cancel.waitForEnabled({ timeout: 30000 });
  await b.pause(1500);
  const tCancel = Date.now();
  await cancel.click();
  const status = await b.$('section[aria-label="Benchmark"] [role="status"]');
  await status.waitForExist({ timeout: 60000 });
  const cancelMs = Date.now() - tCancel;
  check((await status.getText()) === 'Cancelled.', `the panel shows the cancelled state: "${await status.getText()}" (${cancelMs} ms after the click)`);
  check(!(await (await b.$('[data-testid="bench-result"]')).isExisting()), 'a cancelled run shows no result table');
  check(await (await b.$('button=Run benchmark')).isEnabled(), 'a new run can start after the cancel');
  await shot('07-benchmark-cancelled');

  // ---------------------------------------------------------- settings
  console.log('settings');
  await tab('Settings');
  // The native pickers (GTK dialogs) cannot be driven through WebDriver: only
  // their buttons are checked here; vitest covers them with the plugin mocked.
  for (const label of ['Choose file…', 'Add folder…']) {
    const btn = await b.$(`button=${label}`);
    check((await btn.isExisting()) && (await btn.isEnabled()), `the "${label}" picker button is there and enabled`);
  }
  // run_code: off under deny; with code set to ask, the shell finds the
  // mf-sandbox helper beside the app binary and its sandbox probe passes.
  const runCode = async () => text('[data-testid="run-code-status"]');
  await (await b.$('[data-testid="run-code-status"]')).waitForExist({ timeout: 10000 });
  check((await runCode()).includes('set to deny'), `run_code state under deny: ${await runCode()}`);
  await (await b.$('//label[starts-with(normalize-space(.), "code")]/select')).selectByAttribute('value', 'ask');
  await (await b.$('button=Save')).click();
  await b.waitUntil(async () => !(await runCode()).includes('deny'), { timeout: 20000, interval: 200 });
  check((await runCode()).startsWith('run_code is offered (sandbox: '), `run_code with the helper beside the app: ${await runCode()}`);
  // The model download, as clicked: progress, sha256 check, the file in models/.
  const download = await b.$('button=Download Qwen3 8B Q4_K_M');
  // Centred, clear of the sticky header.
  await download.scrollIntoView({ block: 'center' });
  await download.click();
  const dl = await b.$('[data-testid="download-status"]');
  await b.waitUntil(async () => (await dl.isExisting()) && /verified|error|mismatch/i.test(await dl.getText()), { timeout: 60000, interval: 200 });
  check((await dl.getText()).includes(`sha256 ${modelSha.slice(0, 12)}… verified`), `the download from 127.0.0.1 was saved and verified: ${await dl.getText()}`);
  const saved = join(repo, 'models', DOWNLOAD_NAME);
  check(existsSync(saved) && readFileSync(saved).equals(modelBytes), `the file in models/ is the served one (${saved})`);
  await b.waitUntil(async () => (await b.$$('select[aria-label="Models in models/"] option')).length > 0, { timeout: 10000 });
  const listed = [];
  for (const o of await b.$$('select[aria-label="Models in models/"] option')) listed.push(await o.getText());
  check(listed.some((t) => t.startsWith(DOWNLOAD_NAME)), `the models list shows it: ${listed.join(', ')}`);
  await shot('08-download');
  const area = await b.$('//label[contains(., "Workspace roots")]/textarea');
  await area.setValue('/definitely/not/here');
  await (await b.$('button=Save')).click();
  const msg = await b.$('[data-field="workspace_roots"]');
  await msg.waitForExist({ timeout: 10000 });
  check((await msg.getText()).includes('is not a folder'), `the shell's own validation message shows: ${await msg.getText()}`);
  await shot('05-settings');

  // ---------------------------------------------------------- close mid-run, reopen, resume with the saved KV cache
  // mf-agent's session core saves the KV cache after every tool-calling reply
  // (kv/ID.bin in MF_HOME), before the calls run. The app is restarted with
  // the first settings (the steps above changed them), an investigation is
  // started and the app is closed while its first call waits for approval;
  // a new app process lists it as interrupted, and Resume loads the cache
  // instead of decoding the history again.
  console.log(`close mid-investigation, reopen, resume (${secs()} s)`);
  // The test model's banner says the page has its app info (no banner on another model: pass false).
  const openApp = async (banner = true) => {
    if (browser) await browser.deleteSession();
    browser = await launchApp();
    const w = browser;
    if (banner) await (await w.$('[data-testid="notice"]')).waitForExist({ timeout: 20000 });
    return {
      w,
      text: async (sel) => ((await (await w.$(sel)).isExisting()) ? (await w.$(sel)).getText() : ''),
      tab: async (label) => (await (await w.$('nav')).$(`button=${label}`)).click(),
    };
  };
  writeSettings();
  const first = await openApp();
  await (await first.w.$('textarea[aria-label="Question"]')).setValue(QUESTION);
  const kvDir = join(home, 'kv');
  const cached = () => (existsSync(kvDir) ? readdirSync(kvDir).filter((f) => f.endsWith('.bin')).length : 0);
  const cachesBefore = cached();
  await (await first.w.$('button=Investigate')).click();
  await (await first.w.$('[data-testid="started"]')).waitForExist({ timeout: 60000 });
  const savedMidRun = await first.w
    .waitUntil(
      async () => {
        const approve = await first.w.$('button=Approve');
        return (await approve.isExisting()) && (await approve.isEnabled()) && cached() > cachesBefore;
      },
      { timeout: 180000, interval: 300 },
    )
    .catch(() => false);
  check(savedMidRun, 'the running investigation saved its KV cache (a resume point) and waits for an approval');
  const reopened = await openApp();
  console.log(`  app closed mid-investigation and opened again (${secs()} s)`);
  const b2 = reopened.w;
  const text2 = reopened.text;
  const tab2 = reopened.tab;
  await tab2('History');
  await (await b2.$('[data-testid="history-row"]')).waitForExist({ timeout: 10000 });
  // The closed app's process may take a moment to exit: History marks its run
  // interrupted once it is gone (Refresh asks again).
  await b2
    .waitUntil(
      async () => {
        if ((await (await b2.$('[data-testid="history-row"]')).getText()).includes('interrupted')) return true;
        await (await b2.$('button=Refresh')).click();
        return false;
      },
      { timeout: 30000, interval: 1000 },
    )
    .catch(() => {});
  const top = await b2.$('[data-testid="history-row"]');
  check((await top.getText()).includes('interrupted'), `the closed run is listed as interrupted: ${await top.getText()}`);
  await (await top.$('button=Resume')).click();
  const restore = await b2.$('[data-testid="kv-restore"]');
  await restore.waitForExist({ timeout: 60000 });
  const restoreText = await restore.getText();
  const spared = num(restoreText.match(/KV cache loaded: ([0-9,]+) tokens/)?.[1] ?? '0');
  check(restoreText.includes('KV cache loaded:') && spared > 0, `after a restart the saved cache was loaded: "${restoreText}"`);
  await b2.saveScreenshot(join(out, '07-restarted-kv-loaded.png')).catch(() => {});
  const stop2 = await b2.$('button=Stop');
  const replayed2 = (await b2.$$('[data-testid="kv-row"]')).length;
  await b2.waitUntil(
    async () => {
      const approve = await b2.$('button=Approve');
      if ((await approve.isExisting()) && (await approve.isEnabled())) await approve.click();
      return (await b2.$$('[data-testid="kv-row"]')).length > replayed2;
    },
    { timeout: 180000, interval: 300 },
  );
  const cells2 = await (await b2.$$('[data-testid="kv-row"]'))[replayed2].$$('td');
  const [prompt2, reused2, decoded2] = [num(await cells2[2].getText()), num(await cells2[3].getText()), num(await cells2[4].getText())];
  check(reused2 >= spared && decoded2 === prompt2 - reused2 && decoded2 < prompt2, `the next round reused the loaded cache: prompt ${prompt2}, reused ${reused2}, decoded ${decoded2} (only the new tokens)`);
  if (await stop2.isEnabled()) await stop2.click();
  await b2.waitUntil(async () => !(await stop2.isEnabled()), { timeout: 120000, interval: 300 });

  // ---------------------------------------------------------- a CLI session resumed in the app, with its own settings
  console.log(`CLI session resumed in the app (${secs()} s)`);
  const mfBin = join(dirname(bin), 'mf');
  const CLI_QUESTION = 'From the command line: call the http tool with url http://127.0.0.1:18931/api/index.json, then answer.';
  execFileSync(
    mfBin,
    // A round cap of 0: stopped before its first round (resumable), whatever the model would say.
    ['investigate', '--model', model, '--ctx', '2048', '--reserve', '256', '--strategy', 'v1', '--safety-cap', '0', '--approve', 'deny', '--allow-host', `127.0.0.1:${PORT}`, '--system', SYSTEM, '--json', CLI_QUESTION],
    { env: { ...process.env, MF_HOME: home }, stdio: ['ignore', 'ignore', 'inherit'], timeout: 300000 },
  );
  await tab2('Investigation');
  await tab2('History');
  await b2.waitUntil(async () => (await text2('[data-testid="history-row"]')).includes('From the command line'), { timeout: 10000, interval: 300 });
  await (await (await b2.$('[data-testid="history-row"]')).$('button=Resume')).click();
  await b2.waitUntil(async () => (await text2('[data-testid="started"]')).includes('strategy v1'), { timeout: 60000, interval: 300 });
  const started = await text2('[data-testid="started"]');
  check(started.includes('strategy v1') && (started.includes('context 2,048') || started.includes('context 2048')) && started.includes('reserve 256'), `the CLI's session runs with its stored settings, not the app's (v2, C 1024): ${started}`);
  const stop3 = await b2.$('button=Stop');
  await b2.waitUntil(async () => !(await stop3.isEnabled()), { timeout: 180000, interval: 300 }).catch(async () => {
    await stop3.click();
  });

  // ---------------------------------------------------------- a demo world, clicked in the empty state
  // A newcomer's first minute: the empty investigation view lists the demo
  // worlds (scenarios/agentic); one click serves the world on loopback and
  // starts an investigation on it with the settings' model: Gemma 3 here, with
  // the default tool-call grammar (SmolLM2 often answers without calling).
  console.log(`demo world from the empty state (${secs()} s)`);
  const { tool_grammar: _grammar, ...withDefaultGrammar } = initialSettings;
  writeFileSync(join(configDir, 'settings.json'), JSON.stringify({ ...withDefaultGrammar, model_path: join(repo, 'models/gemma-3-270m-q4_k_m.gguf'), context: 2048, reserve: 192 }, null, 2));
  const demo = (await openApp(false)).w;
  await (await demo.$('[data-testid="demo-world"]')).waitForExist({ timeout: 20000 });
  let demoCard = null;
  for (const card of await demo.$$('[data-testid="demo-world"]')) {
    if ((await card.getText()).startsWith('Runbook')) demoCard = card;
  }
  check(demoCard !== null, 'the empty state offers the runbook demo world');
  demoCard ??= await demo.$('[data-testid="demo-world"]');
  const demoTitle = (await demoCard.getText()).split('\n')[0];
  const demoQuestion = (await (await demoCard.$('.question')).getText()).replace(/^“|”$/g, '');
  await (await demoCard.$('button=Run this demo')).click();
  await (await demo.$('[data-testid="started"]')).waitForExist({ timeout: 60000 });
  const demoHeading = await (await demo.$('h2.question')).getText();
  check(demoHeading === demoQuestion, `the demo's heading is its plain question ("${demoHeading}")`);
  const folded = await demo.$('[data-testid="instructions"]');
  check((await folded.isExisting()) && (await folded.getAttribute('open')) === null, 'the route the model is told is folded under "instructions"');
  const demoStop = await demo.$('button=Stop');
  const columns = async () => (await demo.$$('[data-testid="chart-column"]')).length;
  const finished = async () => (await demo.$$('[data-testid="tool-card"] [data-testid="tool-result"]')).length;
  await demo.waitUntil(async () => ((await columns()) >= 2 && (await finished()) >= 1) || !(await demoStop.isEnabled()), { timeout: 300000, interval: 500 }).catch(() => {});
  const demoPrompt = num(await (await demo.$('[data-testid="count-prompt"]')).getText().catch(() => '0'));
  check((await finished()) >= 1, `the demo "${demoTitle}" ran tool calls on its world (${await finished()} with results)`);
  check((await columns()) >= 2 && demoPrompt > 0, `its gauges (prompt ${demoPrompt} tokens) and the chart (${await columns()} rounds) fill as it runs`);
  await demo.execute(() => window.scrollTo(0, 0));
  await demo.saveScreenshot(join(out, '09-demo-world.png')).catch(() => {});
  if (await demoStop.isEnabled()) await demoStop.click();
  await demo.waitUntil(async () => !(await demoStop.isEnabled()), { timeout: 120000, interval: 300 }).catch(() => {});

  // ---------------------------------------------------------- a large POST waits for approval: its first line says what leaves
  // The model here is scripted (an OpenAI-compatible endpoint this script
  // serves, whose first reply is one http POST with a 4.6 kB body, under the
  // app's 8 kB argument limit): what is
  // under test is the app's approval prompt, whose first line must say
  // method, host, bytes and the first characters before the body.
  console.log(`a large POST waits for approval (${secs()} s)`);
  const bigBody = JSON.stringify({ report: Array.from({ length: 150 }, (_, i) => `line ${i}: disk web-07 at 97 %`).join('\n') });
  let scriptedCalls = 0;
  const scripted = createServer((req, res) => {
    let body = '';
    req.on('data', (c) => (body += c));
    req.on('end', () => {
      if (req.url !== '/v1/chat/completions') return res.writeHead(404).end();
      scriptedCalls += 1;
      const delta =
        scriptedCalls === 1
          ? { tool_calls: [{ index: 0, id: 'call_big', type: 'function', function: { name: 'http', arguments: JSON.stringify({ method: 'POST', url: `http://127.0.0.1:${PORT}/api/report`, body: bigBody }) } }] }
          : { content: 'The report was not sent.' };
      const chunk = (d, finish) => `data: ${JSON.stringify({ choices: [{ index: 0, delta: d, finish_reason: finish }] })}\n\n`;
      res.writeHead(200, { 'content-type': 'text/event-stream', connection: 'close' });
      res.end(chunk(delta, null) + chunk({}, scriptedCalls === 1 ? 'tool_calls' : 'stop') + 'data: [DONE]\n\n');
    });
  });
  await new Promise((ok) => scripted.listen(0, '127.0.0.1', ok));
  const engineSettings = (over) => writeFileSync(join(configDir, 'settings.json'), JSON.stringify({ ...initialSettings, ...over }, null, 2));
  engineSettings({ engine: 'openai', server_url: `http://127.0.0.1:${scripted.address().port}/v1`, server_model: 'scripted', context: 8192, reserve: 256 });
  const post = (await openApp()).w;
  await (await post.$('textarea[aria-label="Question"]')).setValue('Send the disk report to the storage team.');
  await (await post.$('button=Investigate')).click();
  const line = await post.$('[data-testid="approval-summary"]');
  await line.waitForExist({ timeout: 60000 });
  const lineText = await line.getText();
  check(
    // The channels that carry data (the path the user never named, the body), then their bytes, then the body's start.
    /^POST 127\.0\.0\.1:\d+ · (path, )?body · [0-9,]+ bytes · \{"report":"line 0: disk web-07/.test(lineText) && lineText.startsWith(`POST 127.0.0.1:${PORT} · `),
    `the approval's first line says what leaves, before the ${bigBody.length}-byte body: "${lineText}"`,
  );
  check(await line.isDisplayed({ withinViewport: true }), 'that line is on screen while the body stays folded');
  await post.saveScreenshot(join(out, '10-approval-large-post.png')).catch(() => {});
  await (await post.$('button=Deny')).click();
  const postStop = await post.$('button=Stop');
  await post.waitUntil(async () => !(await postStop.isEnabled()), { timeout: 60000, interval: 300 }).catch(async () => postStop.click());
  scripted.close();

  // ---------------------------------------------------------- a real OpenAI-compatible server
  // llama-cpp-python's server (installed by scripts/setup.sh outside the
  // repository) runs SmolLM2; the app's OpenAI-compatible engine drives the
  // same investigation through it, tools as text (its template drops tool fields).
  console.log(`an investigation on a real OpenAI-compatible server (${secs()} s)`);
  const serverPython = process.env.MF_OPENAI_SERVER_PYTHON ?? join(homedir(), '.cache/measured-forgetting/openai-server/venv/bin/python');
  check(existsSync(serverPython), `llama-cpp-python's server is installed (${serverPython}; scripts/setup.sh installs it)`);
  const OAI_PORT = 18941;
  const oai = spawn(serverPython, ['-m', 'llama_cpp.server', '--model', model, '--host', '127.0.0.1', '--port', String(OAI_PORT), '--n_ctx', '2048', '--n_threads', String(availableParallelism())], { stdio: ['ignore', 'ignore', 'ignore'] });
  try {
    let up = false;
    for (let i = 0; i < 120 && !up; i++) {
      up = await fetch(`http://127.0.0.1:${OAI_PORT}/v1/models`).then((r) => r.ok, () => false);
      if (!up) await new Promise((r) => setTimeout(r, 500));
    }
    check(up, `the server answers on 127.0.0.1:${OAI_PORT}`);
    const served = up ? (await (await fetch(`http://127.0.0.1:${OAI_PORT}/v1/models`)).json()).data[0].id : model;
    engineSettings({ engine: 'openai', server_url: `http://127.0.0.1:${OAI_PORT}/v1`, server_model: served, server_tools_in_text: true, context: 2048, reserve: 256 });
    const o = (await openApp()).w;
    await (await o.$('textarea[aria-label="Question"]')).setValue(QUESTION);
    await (await o.$('button=Investigate')).click();
    await (await o.$('[data-testid="started"]')).waitForExist({ timeout: 60000 });
    const oStop = await o.$('button=Stop');
    const oColumns = async () => (await o.$$('[data-testid="chart-column"]')).length;
    const before = requested.length;
    await o
      .waitUntil(
        async () => {
          const approve = await o.$('button=Approve');
          if ((await approve.isExisting()) && (await approve.isEnabled())) await approve.click();
          return ((await oColumns()) >= 2 && requested.length > before) || !(await oStop.isEnabled());
        },
        { timeout: 240000, interval: 300 },
      )
      .catch(() => {});
    const oPrompt = num(await (await o.$('[data-testid="count-prompt"]')).getText().catch(() => '0'));
    check(requested.length > before, `the model on the server called the http tool on the loopback API (${requested.slice(before).join(', ')})`);
    check(oPrompt > 0 && (await oColumns()) >= 2, `gauges (prompt ${oPrompt} tokens, from the server's tokenizer) and the chart (${await oColumns()} rounds) on the OpenAI-compatible engine`);
    await o.execute(() => window.scrollTo(0, 0));
    await o.saveScreenshot(join(out, '11-openai-compatible-server.png')).catch(() => {});
    if (await oStop.isEnabled()) await oStop.click();
    await o.waitUntil(async () => !(await oStop.isEnabled()), { timeout: 120000, interval: 300 }).catch(() => {});
  } finally {
    oai.kill();
  }
} catch (e) {
  failures += 1;
  console.log(`  FAIL ${e?.stack ?? e}`);
  try {
    execFileSync('import', ['-window', 'root', join(out, 'failure.png')]);
  } catch {}
} finally {
  if (browser) await browser.deleteSession().catch(() => {});
  driver.kill();
  api.close();
  files.close();
  removeDownload();
  // MF_E2E_KEEP=1 keeps the app's config and session store for inspection.
  if (process.env.MF_E2E_KEEP) console.log(`scratch kept: ${scratch}`);
  else rmSync(scratch, { recursive: true, force: true });
}
console.log(`${failures === 0 ? 'all checks passed' : `${failures} check(s) failed`} in ${secs()} s`);
process.exit(failures === 0 ? 0 : 1);
