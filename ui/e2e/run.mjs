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
  const shot = (name) => page.screenshot({ path: resolve(out, `${name}.png`), fullPage: true });
  const width = (sel) => page.$eval(sel, (el) => el.getBoundingClientRect().width);

  console.log('investigation');
  await page.getByRole('textbox', { name: 'Question' }).fill('Which region has the most 5xx errors, and why?');
  await page.getByRole('button', { name: 'Investigate' }).click();
  await page.getByRole('button', { name: 'Approve' }).waitFor();
  const compressibleBefore = await width('[data-testid="seg-compressible"]');
  await shot('01-investigation-approval');
  await page.getByRole('button', { name: 'Approve' }).click();
  await page.waitForFunction(() => window.__shell.holding === 'compacting');
  const compressibleDuring = await width('[data-testid="seg-compressible"]');
  check(compressibleDuring > compressibleBefore + 50, `gauge moved: compressible ${compressibleBefore.toFixed(0)} → ${compressibleDuring.toFixed(0)} px`);
  check((await page.getByTestId('forecast').textContent()).includes('Compacting now'), 'gauge says a compaction is running');
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
  await page.getByRole('button', { name: 'Reopen' }).click();
  await page.getByTestId('exit').waitFor();
  check((await page.getByTestId('compaction-tokens').textContent()) === '1,490 → 770 tokens', 'reopened investigation replays its compaction');
  check((await page.getByRole('button', { name: 'Stop' }).isDisabled()) === true, 'a reopened investigation has no live controls');

  console.log('settings');
  await page.getByRole('button', { name: 'Settings', exact: true }).click();
  await page.getByLabel(/Generation reserve/).fill('4096');
  check((await page.locator('[data-field="reserve"]').textContent()).includes('smaller than the context size'), 'settings validation message');
  await shot('05-settings-validation');

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
