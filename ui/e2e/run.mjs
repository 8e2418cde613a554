// Browser test of the real UI over the scripted shell (e2e/scripted-shell.ts):
// Debian's Chromium, driven by playwright-core.
// It checks what a person would see at each step and saves screenshots in
// $MF_SCREENSHOTS (default: <repo>/artifacts/screenshots/web).
//
// The page is a production build served with the app's CSP. This is not the
// real-window test of the Tauri app (that needs src-tauri and tauri-driver);
// it exercises the same components, `tauriApi`, Channels and CSS.
import { mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { build, preview } from 'vite';
import { chromium } from 'playwright-core';

const here = dirname(fileURLToPath(import.meta.url));
const ui = resolve(here, '..');
const out = resolve(process.env.MF_SCREENSHOTS ?? resolve(ui, '../artifacts/screenshots/web'));
const browserPath = process.env.MF_CHROMIUM ?? '/usr/bin/chromium';
mkdirSync(out, { recursive: true });

// The production bundle of the page, served with the app's own CSP (from the
// root tauri.conf.json), so anything the bundle would need beyond it (eval,
// inline scripts, remote loads) shows up as a violation.
const csp = JSON.parse(readFileSync(resolve(ui, '../tauri.conf.json'), 'utf8')).app.security.csp;
const outDir = mkdtempSync(join(tmpdir(), 'mf-ui-e2e-'));
const configFile = resolve(ui, 'vite.config.ts');
await build({ root: ui, configFile, logLevel: 'error', build: { outDir, emptyOutDir: true, rollupOptions: { input: resolve(here, 'index.html') } } });
const server = await preview({ root: ui, configFile, logLevel: 'error', build: { outDir }, preview: { port: 0, host: '127.0.0.1', headers: { 'Content-Security-Policy': csp } } });
const address = server.httpServer?.address();
const port = typeof address === 'object' && address ? address.port : 0;
const browser = await chromium.launch({
  executablePath: browserPath,
  args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-dev-shm-usage'],
});

let failures = 0;
function check(cond, what) {
  if (cond) console.log(`  ok   ${what}`);
  else {
    failures += 1;
    console.log(`  FAIL ${what}`);
  }
}

try {
  const page = await browser.newPage({ viewport: { width: 1280, height: 800 } });
  const errors = [];
  page.on('pageerror', (e) => errors.push(String(e)));
  page.on('console', (m) => m.type() === 'error' && errors.push(m.text()));
  await page.addInitScript(() => {
    window.__cspViolations = [];
    document.addEventListener('securitypolicyviolation', (e) => window.__cspViolations.push(`${e.violatedDirective} ${e.blockedURI}`));
  });
  await page.goto(`http://127.0.0.1:${port}/e2e/index.html`);
  // What the 1280×800 window shows (a full-page capture would paint the sticky header mid-page).
  const shot = (name) => page.screenshot({ path: resolve(out, `${name}.png`) });
  const width = (sel) => page.$eval(sel, (el) => el.getBoundingClientRect().width);

  const noSideways = () => page.evaluate(() => document.documentElement.scrollWidth <= window.innerWidth);

  console.log('empty state');
  await page.getByTestId('demo-world').first().waitFor();
  const demos = await page.getByTestId('demo-world').allTextContents();
  check(demos.length === 3, `the empty state offers the ${demos.length} demo worlds`);
  check(demos[0].includes('Why did 5xx errors spike?') && demos[0].includes('Which region has the most 5xx errors, and why?'), 'each demo shows its title and question');
  check(await noSideways(), 'no horizontal scrolling at 1280×800 (empty state)');
  await shot('00-empty-state');

  console.log('investigation');
  await page.getByRole('textbox', { name: 'Question' }).fill('Which region has the most 5xx errors, and why?');
  await page.getByRole('textbox', { name: 'Question' }).press('Control+Enter');
  await page.getByRole('button', { name: 'Approve' }).waitFor();
  check(await page.evaluate(() => window.__shell.calls.some(([c, a]) => c === 'start_investigation' && a.question === 'Which region has the most 5xx errors, and why?')), 'Ctrl+Enter sent the question');
  check((await page.getByTestId('demo-world').count()) === 0, 'the demo offer gives way to the investigation');
  const summary = page.getByTestId('approval-summary');
  check((await summary.textContent()) === 'GET 127.0.0.1:8931 · 10 bytes of query · status=5xx', 'the approval shows its summary line');
  check((await summary.evaluate((el) => Number(getComputedStyle(el).fontWeight))) >= 600, 'the summary line is bold');
  check(!(await page.getByTestId('approval-args').isVisible()), 'the full arguments are folded below it');
  check(await page.getByRole('button', { name: 'Allow this host for the session' }).isVisible(), 'the card offers to allow the host for the session');
  const compressibleBefore = await width('[data-testid="seg-compressible"]');
  await shot('01-investigation-approval');
  await page.getByRole('button', { name: 'Approve' }).click();
  await page.waitForFunction(() => window.__shell.holding === 'compacting');
  const compressibleDuring = await width('[data-testid="seg-compressible"]');
  check(compressibleDuring > compressibleBefore + 50, `gauge moved: compressible ${compressibleBefore.toFixed(0)} → ${compressibleDuring.toFixed(0)} px`);
  check((await page.getByTestId('forecast').textContent()).includes('Compacting now'), 'gauge says a compaction is running');
  check(await page.getByTestId('chart-compacting').isVisible(), 'the chart marks the running compaction');
  const bar = await page.$eval('[data-testid="gauge-bar"]', (el) => el.getBoundingClientRect().width);
  const line = await page.$eval('[data-testid="threshold-line"]', (el) => el.getBoundingClientRect().left - el.parentElement.getBoundingClientRect().left);
  const inLegend = await page.$eval('.legend .dot.reserve', (el) => {
    const r = el.getBoundingClientRect();
    const l = el.closest('.legend').getBoundingClientRect();
    return r.left >= l.left && r.right <= l.right && r.top >= l.top && r.bottom <= l.bottom;
  });
  check(inLegend, 'the reserve swatch sits inside the legend');
  check(Math.abs(line / bar - 1228 / 2048) < 0.01, `threshold line at ${(line / bar).toFixed(3)} of the bar (1228/2048 = ${(1228 / 2048).toFixed(3)})`);
  await page.getByTestId('seg-compressible').hover();
  check((await page.getByTestId('gauge-hover').textContent()).trim() === 'compressible: 880 tokens', 'exact count on hover');
  await shot('02-gauge-during-compaction');
  await page.evaluate(() => window.__shell.release());
  await page.getByTestId('exit').waitFor();
  check((await page.getByTestId('compaction-tokens').textContent()) === '1,490 → 770 tokens', 'compaction in the timeline');
  check((await page.getByTestId('final-answer').textContent()).includes('eu-west'), 'final answer shown');
  check((await page.getByTestId('kv-row').count()) === 4, 'four KV rows (rounds 1, 2, 4 and the summary pass)');
  check((await page.getByTestId('truncation').textContent()).includes('9,412'), 'truncation note on the tool card');
  check((await page.getByTestId('chart-column').count()) === 5, 'the chart has a column per gauge event (5)');
  check(JSON.stringify(await page.getByTestId('chart-drop-label').allTextContents()) === JSON.stringify(['1,490 → 770']), 'the chart labels the compaction drop 1,490 → 770');
  const [pre, post] = await Promise.all([3, 4].map((i) => page.getByTestId('chart-column').nth(i).boundingBox()));
  const drop = await page.locator('[data-testid="chart-drop"] .drop-arrow').boundingBox();
  check(pre.x + pre.width <= drop.x + 1 && drop.x <= post.x + 1, 'the drop sits between the last column before the compaction and the first after it');
  const heights = await Promise.all([3, 4].map((i) => page.getByTestId('chart-compressible').nth(i).evaluate((el) => el.getBoundingClientRect().height)));
  check(heights[1] < heights[0] / 3, `the compressible zone fell in the chart (${heights[0].toFixed(0)} → ${heights[1].toFixed(0)} px)`);
  check((await page.getByTestId('final-answer').locator('table td').count()) === 6, "the answer's markdown table is rendered");
  check((await page.getByTestId('final-answer').locator('strong').first().textContent()) === 'eu-west', "the answer's bold text is rendered");
  check(await noSideways(), 'no horizontal scrolling at 1280×800 (investigation)');
  const aside = await page.locator('aside').boundingBox();
  check(aside.y + aside.height <= 800 + 1 && aside.x + aside.width <= 1280, 'the side panel (gauge, chart, timeline, KV) stays inside the 1280×800 window (it scrolls on its own)');
  const kvFits = await page.$eval('section[aria-label="KV cache per round"] .scroll', (el) => [el.scrollWidth, el.clientWidth]);
  check(kvFits[0] <= kvFits[1], `the KV table fits the side panel without scrolling sideways (${kvFits[0]} of ${kvFits[1]} px)`);
  await page.evaluate(() => window.scrollTo(0, 0));
  await shot('02b-answer-and-chart');
  await page.getByTestId('compaction').getByRole('button').click();
  const fates = await page.getByTestId('fate').allTextContents();
  check(JSON.stringify(fates) === JSON.stringify(['kept', 'kept', 'summarised', 'summarised', 'kept', 'kept']), `ledger fates ${fates.join(',')}`);
  await page.getByRole('button', { name: 'Undo this compaction' }).click();
  await page.getByRole('button', { name: 'Restored' }).waitFor();
  check(await page.evaluate(() => window.__shell.calls.some(([c, a]) => c === 'undo_compaction' && a.id === 1 && a.round === 3)), 'undo called undo_compaction {id 1, round 3}');
  await page.getByRole('heading', { name: /Ledger/ }).scrollIntoViewIfNeeded();
  await shot('03-ledger');

  console.log('benchmark');
  await page.getByRole('button', { name: 'Benchmark', exact: true }).click();
  await page.getByRole('button', { name: 'Run benchmark' }).click();
  await page.getByRole('button', { name: 'Export Markdown' }).waitFor();
  check((await page.getByTestId('bench-progress').textContent()).startsWith('2 / 2'), 'benchmark progress reached 2 / 2');
  check((await page.getByTestId('brackets').textContent()).includes('contradiction 1.75'), 'keyword control brackets shown');
  await page.getByRole('button', { name: 'Export Markdown' }).click();
  check((await page.getByTestId('exported').textContent()).includes('bench-run-1.md'), 'export reports the file');
  await page.getByRole('radio', { name: 'judge' }).check();
  check((await page.getByTestId('brackets').textContent()).includes('contradiction 0.50'), 'judge control brackets shown');
  await shot('04-benchmark');

  console.log('history');
  await page.getByRole('button', { name: 'History', exact: true }).click();
  const row = (q) => page.getByTestId('history-row').filter({ hasText: q });
  await row('Which region has the most 5xx errors?').getByRole('button', { name: 'Reopen' }).click();
  await page.getByTestId('exit').waitFor();
  check((await page.getByTestId('compaction-tokens').textContent()) === '1,490 → 770 tokens', 'reopened investigation replays its compaction');
  check((await page.getByTestId('chart-column').count()) === 5 && (await page.getByTestId('chart-drop-label').textContent()) === '1,490 → 770', 'the replayed history draws the same chart');
  check((await page.getByRole('button', { name: 'Stop' }).isDisabled()) === true, 'a reopened investigation has no live controls');

  console.log('resume');
  await page.getByRole('button', { name: 'History', exact: true }).click();
  await row('Is us-east still failing?').waitFor();
  await shot('05b-history');
  await row('Is us-east still failing?').getByRole('button', { name: 'Resume' }).click();
  await page.getByTestId('kv-restore').waitFor();
  check((await page.getByTestId('kv-restore').textContent()).trim() === 'KV cache loaded: 1,140 tokens not decoded again', 'resume says the KV cache was loaded and how much it spared');
  await page.getByTestId('exit').waitFor();
  check((await page.getByTestId('chart-column').count()) === 4, 'the chart continues after the replay (3 stored gauges + 1 live)');
  await page.evaluate(() => window.scrollTo(0, 0));
  await shot('06-resumed-kv-loaded');

  console.log('settings');
  await page.getByRole('button', { name: 'Settings', exact: true }).click();
  await page.getByLabel(/Generation reserve/).fill('4096');
  check((await page.locator('[data-field="reserve"]').textContent()).includes('smaller than the context size'), 'settings validation message');
  await shot('05-settings-validation');

  console.log('demo in one click');
  await page.reload();
  await page.getByRole('button', { name: 'Run demo: Who owns the full disk?' }).click();
  await page.getByRole('button', { name: 'Approve' }).waitFor();
  check(await page.evaluate(() => window.__shell.calls.some(([c, a]) => c === 'start_demo' && a.world === 'disk-owner')), 'one click called start_demo {world: disk-owner}');
  check((await page.locator('.run h2').textContent()) === 'Which host has a disk over 95 % full, and who owns it?', "the demo runs its world's question");
  await page.getByRole('button', { name: 'Approve' }).click();
  await page.waitForFunction(() => window.__shell.holding === 'compacting');
  await page.evaluate(() => window.__shell.release());
  await page.getByTestId('exit').waitFor();
  check((await page.getByTestId('chart-drop-label').count()) === 1 && (await page.getByTestId('tool-card').count()) === 2, 'the demo filled the chart and the tool cards');
  check((await page.getByTestId('chart-compacting').count()) === 0, 'the compacting mark gave way to the drop');
  await page.evaluate(() => window.scrollTo(0, 0));
  await shot('07-demo');

  console.log('dark mode');
  await page.emulateMedia({ colorScheme: 'dark' });
  const bg = await page.evaluate(() => getComputedStyle(document.body).backgroundColor);
  const lum = bg.match(/\d+/g).slice(0, 3).map(Number).reduce((a, b) => a + b, 0) / 3;
  check(lum < 60, `the page follows the OS into dark mode (body ${bg})`);
  const pinned = await page.locator('[data-testid="chart-pinned"]').first().evaluate((el) => getComputedStyle(el).fill);
  const seg = await page.getByTestId('seg-pinned').evaluate((el) => getComputedStyle(el).backgroundColor);
  check(pinned === seg, `one colour per zone: the chart's pinned (${pinned}) is the gauge's (${seg})`);
  await page.waitForTimeout(400); // past the controls' colour transition
  await shot('08-dark-investigation');
  await page.reload();
  await page.getByTestId('demo-world').first().waitFor();
  await shot('09-dark-empty-state');
  await page.emulateMedia({ colorScheme: 'light' });

  const violations = await page.evaluate(() => window.__cspViolations);
  check(violations.length === 0, `no CSP violations under "${csp}"${violations.length ? ': ' + violations.join(' | ') : ''}`);
  check(errors.length === 0, `no page errors${errors.length ? ': ' + errors.join(' | ') : ''}`);
} finally {
  await browser.close();
  await server.close();
  rmSync(outDir, { recursive: true, force: true });
}
console.log(`screenshots in ${out}`);
if (failures > 0) {
  console.error(`${failures} check(s) failed`);
  process.exit(1);
}
