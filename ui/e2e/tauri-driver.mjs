// tauri-driver for the real-window tests (app.mjs, installed.mjs): started
// on `port` (WebKitWebDriver behind it on `nativePort`), ready once its
// port accepts connections.
import { spawn } from 'node:child_process';
import { connect } from 'node:net';

/** Whether something accepts connections on 127.0.0.1:`port`. */
export const portOpen = (port) =>
  new Promise((ok) => {
    const s = connect(port, '127.0.0.1');
    s.once('connect', () => (s.destroy(), ok(true)));
    s.once('error', () => ok(false));
  });

/** Starts tauri-driver and waits (up to 10 s) for its port; returns the child process. */
export async function startTauriDriver({ bin, port, nativePort, env, cwd }) {
  const args = ['--port', String(port)];
  if (nativePort) args.push('--native-port', String(nativePort));
  const driver = spawn(bin, args, { env, cwd, stdio: ['ignore', 'inherit', 'inherit'] });
  for (let i = 0; i < 100 && !(await portOpen(port)); i++) await new Promise((r) => setTimeout(r, 100));
  return driver;
}
