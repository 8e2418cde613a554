// The real app, the real `tauriApi`, over a scripted shell: `mockIPC`
// answers the commands and streams events into the Channels the way the
// Rust side does (`{index, message}` to the channel's callback id). Used by
// run.mjs in a real browser; never part of the app's build.
import { mount } from 'svelte';
import { mockIPC } from '@tauri-apps/api/mocks';
import App from '../src/App.svelte';
import { tauriApi } from '../src/lib/api';
import { ScriptedShell } from './scripted-shell';

const shell = new ScriptedShell();
mockIPC((cmd, args) => shell.handle(cmd, (args ?? {}) as Record<string, unknown>));
(window as unknown as { __shell: ScriptedShell }).__shell = shell;

const target = document.getElementById('app');
if (!target) throw new Error('no #app');
mount(App, { target, props: { api: tauriApi } });
