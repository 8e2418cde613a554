// The installed app: the binary of the .deb (extracted by
// scripts/bundle-test.sh into a folder laid out as it installs, usr/bin and
// usr/lib/Measured Forgetting) started through tauri-driver as a user would,
// from outside the checkout, with a fresh home and no MF_* variables. It
// checks that the window opens, that the empty state lists the demo worlds
// shipped in the bundle's resources, and that models are looked for in the
// user's data folder (an installed app has no checkout), and that the code
// tool's helper installed beside the app is found.
//
// Environment: MF_INSTALLED_ROOT (the extracted package, required),
// MF_TAURI_DRIVER (default ~/.cache/measured-forgetting/tools/bin/tauri-driver).
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { homedir, tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { remote } from 'webdriverio';
import { startTauriDriver } from './tauri-driver.mjs';

const repo = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const root = process.env.MF_INSTALLED_ROOT;
const driverBin = process.env.MF_TAURI_DRIVER ?? join(homedir(), '.cache/measured-forgetting/tools/bin/tauri-driver');
const out = resolve(process.env.MF_SCREENSHOTS ?? join(repo, 'artifacts/screenshots/app'));
// tauri-driver's own defaults (4444, and 4445 for WebKitWebDriver) are the real-window test's.
const DRIVER_PORT = 4446;
const NATIVE_PORT = 4447;
if (!root || !existsSync(join(root, 'usr/bin/measured-forgetting'))) {
  console.error(`error: MF_INSTALLED_ROOT must be an extracted package with usr/bin/measured-forgetting (got ${root})`);
  process.exit(2);
}
const bin = join(root, 'usr/bin/measured-forgetting');
const shipped = join(root, 'usr/lib/Measured Forgetting/scenarios/agentic');
mkdirSync(out, { recursive: true });

// A user's environment: a fresh home, started from it, nothing pointing at the checkout.
const scratch = mkdtempSync(join(tmpdir(), 'mf-installed-'));
const home = join(scratch, 'home');
mkdirSync(home);
const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('MF_') && !k.startsWith('XDG_') && k !== 'CARGO_TARGET_DIR'));
env.HOME = home;
const driver = await startTauriDriver({ bin: driverBin, port: DRIVER_PORT, nativePort: NATIVE_PORT, env, cwd: home });

let failures = 0;
const check = (cond, what) => {
  console.log(`  ${cond ? 'ok  ' : 'FAIL'} ${what}`);
  if (!cond) failures += 1;
};
const t0 = Date.now();
let browser;
try {
  browser = await remote({
    hostname: '127.0.0.1',
    port: DRIVER_PORT,
    logLevel: 'error',
    connectionRetryCount: 1,
    capabilities: { 'wdio:enforceWebDriverClassic': true, 'tauri:options': { application: bin } },
  });
  const b = browser;
  console.log(`installed app started from ${bin} (${((Date.now() - t0) / 1000).toFixed(1)} s)`);
  check((await b.getTitle()) === 'Measured Forgetting', `the window's title: ${await b.getTitle()}`);
  const worlds = readdirSync(shipped).filter((f) => f.endsWith('.json')).length;
  await (await b.$('[data-testid="demo-world"]')).waitForExist({ timeout: 30000 }).catch(() => {});
  const cards = (await b.$$('[data-testid="demo-world"]')).length;
  check(worlds > 0 && cards === worlds, `the empty state lists the ${worlds} demo worlds of the bundle's resources (${cards} shown)`);
  await b.saveScreenshot(join(out, '12-installed-deb.png'));
  await (await (await b.$('nav')).$('button=Settings')).click();
  const modelField = await b.$('//label[starts-with(normalize-space(.), "Model file")]/input');
  await modelField.waitForExist({ timeout: 10000 });
  const modelPath = await modelField.getValue();
  const dataModels = join(home, '.local/share/measured-forgetting/models');
  check(modelPath.startsWith(dataModels + '/'), `models are looked for in the user's data folder: ${modelPath}`);
  // The code tool's sandbox helper ships beside the app (usr/bin/mf-sandbox).
  const runCode = await b.$('[data-testid="run-code-status"]');
  await runCode.waitForExist({ timeout: 10000 });
  const status = await runCode.getText();
  check(status.startsWith('run_code is offered'), `the package's mf-sandbox is found beside the app and its sandbox works: ${status}`);
  await b.saveScreenshot(join(out, '13-installed-deb-settings.png'));
} catch (e) {
  console.error(e);
  failures += 1;
} finally {
  await browser?.deleteSession().catch(() => {});
  driver.kill();
  rmSync(scratch, { recursive: true, force: true });
}
console.log(failures === 0 ? `installed app: all checks passed in ${((Date.now() - t0) / 1000).toFixed(1)} s` : `installed app: ${failures} check(s) failed`);
process.exit(failures === 0 ? 0 : 1);
