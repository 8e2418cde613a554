import { describe, expect, it, vi } from 'vitest';
import { fireEvent, render, screen, within } from '@testing-library/svelte';
import { flushSync } from 'svelte';
import SettingsPanel from '../src/lib/components/SettingsPanel.svelte';
import { ApiError, type Settings } from '../src/lib/api';
import { calibration, mockApi } from './fixtures';

const field = (name: string) => screen.queryByText((_, el) => el?.getAttribute('data-field') === name);
const input = (label: RegExp) => screen.getByLabelText(label) as HTMLInputElement;
const save = () => screen.getByRole('button', { name: 'Save' }) as HTMLButtonElement;

describe('SettingsPanel', () => {
  it("shows the model's stored calibration and fills the form with its recommendation, saved only on Save", async () => {
    const { api } = mockApi({ calibration: vi.fn(async () => calibration()) });
    render(SettingsPanel, { api });
    expect((await screen.findByTestId('calibration-recommended')).textContent).toContain('Recommended: v2 at ratio 0.6.');
    expect(screen.getByTestId('calibration').querySelectorAll('tbody tr')).toHaveLength(4);
    // Retention by likelihood, the ranking's first key; a row that was not scored shows a dash.
    const r = [...screen.getByTestId('calibration').querySelectorAll('tbody tr')].map((tr) => tr.children[2]!.textContent);
    expect(r).toEqual(['0.41', '0.12', '0.58', '–']);
    await fireEvent.click(screen.getByRole('button', { name: 'Use the recommendation' }));
    expect((screen.getByLabelText(/Strategy/) as HTMLSelectElement).value).toBe('v2');
    expect(input(/Threshold ratio/).value).toBe('0.6');
    expect(api.saveSettings).not.toHaveBeenCalled();
  });

  it("puts a strategy chosen in History's comparison into the form, saved only on Save", async () => {
    const { api } = mockApi();
    render(SettingsPanel, { api, suggestion: { strategy: 'v2.1', from: 7 } });
    expect((await screen.findByTestId('strategy-suggested')).textContent).toContain('Strategy v2.1, from the comparison on investigation 7');
    expect((screen.getByLabelText(/Strategy/) as HTMLSelectElement).value).toBe('v2.1');
    expect(api.saveSettings).not.toHaveBeenCalled();
    await fireEvent.click(save());
    await vi.waitFor(() => expect(api.saveSettings).toHaveBeenCalledWith(expect.objectContaining({ strategy: 'v2.1' })));
    await vi.waitFor(() => expect(screen.queryByTestId('strategy-suggested')).toBeNull());
  });

  it('chooses another model to write the summaries, and back to the own model', async () => {
    const { api } = mockApi();
    render(SettingsPanel, { api });
    const by = (await screen.findByLabelText(/Summaries by/)) as HTMLSelectElement;
    expect(by.value).toBe('own');
    expect(screen.queryByLabelText(/Summariser model/)).toBeNull();
    await fireEvent.change(by, { target: { value: 'openai' } });
    await fireEvent.input(screen.getByLabelText(/Summariser model/), { target: { value: 'qwen3-8b' } });
    await fireEvent.input(screen.getByLabelText(/Summariser server URL/), { target: { value: 'http://127.0.0.1:8080/v1' } });
    await fireEvent.click(save());
    await vi.waitFor(() =>
      expect(api.saveSettings).toHaveBeenCalledWith(expect.objectContaining({ summariser: 'openai', summariser_model: 'qwen3-8b', summariser_url: 'http://127.0.0.1:8080/v1' })),
    );
    // A file needs no URL.
    await fireEvent.change(by, { target: { value: 'embedded' } });
    expect(screen.queryByLabelText(/Summariser server URL/)).toBeNull();
    await fireEvent.change(by, { target: { value: 'own' } });
    expect(screen.queryByLabelText(/Summariser model/)).toBeNull();
    await fireEvent.click(save());
    await vi.waitFor(() => expect(vi.mocked(api.saveSettings).mock.calls.at(-1)?.[0].summariser).toBeUndefined());
  });

  it("tests the MCP servers as written (not saved): each one's tools, or why it failed", async () => {
    const { api } = mockApi();
    render(SettingsPanel, { api });
    const box = (await screen.findByLabelText(/MCP servers/)) as HTMLTextAreaElement;
    const test = screen.getByRole('button', { name: 'Test' }) as HTMLButtonElement;
    expect(test.disabled).toBe(true);
    const json = '{"mcpServers": {"everything": {"command": "mcp-server-everything", "args": ["stdio"]}, "broken": {"command": "/nonexistent/mcp-server"}}}';
    await fireEvent.input(box, { target: { value: json } });
    expect(test.disabled).toBe(false);
    await fireEvent.click(test);
    expect(api.testMcpServers).toHaveBeenCalledWith(expect.objectContaining({ mcp_servers: JSON.parse(json) }));
    const rows = within(await screen.findByTestId('mcp-test')).getAllByRole('listitem');
    expect(rows[0]!.textContent).toContain('everything: 2 tools — running (process 4242)');
    expect(rows[0]!.textContent).toContain('everything__echo, everything__get-sum');
    expect(rows[1]!.classList.contains('failed')).toBe(true);
    expect(rows[1]!.textContent).toContain('broken: failed — cannot start /nonexistent/mcp-server');
    expect(api.saveSettings).not.toHaveBeenCalled();
    // JSON that does not parse cannot be tested.
    await fireEvent.input(box, { target: { value: '{"mcpServers": ' } });
    expect(test.disabled).toBe(true);
  });

  it('calibrates the model with progress, then shows the new recommendation', async () => {
    const { api, sinks } = mockApi();
    render(SettingsPanel, { api });
    expect(await screen.findByText('Not calibrated yet for this model.')).toBeTruthy();
    await fireEvent.click(screen.getByRole('button', { name: 'Calibrate this model' }));
    expect(api.calibrateModel).toHaveBeenCalled();
    expect((screen.getByRole('button', { name: 'Calibrate this model' }) as HTMLButtonElement).disabled).toBe(true);
    const c = calibration();
    sinks.calibration?.({ type: 'progress', done: 1, total: 4, row: c.rows[0]! });
    flushSync();
    expect(screen.getByTestId('calibration-progress').textContent).toBe('1 / 4 · v1 at 0.6: route 6/6, kept 1 of 5 facts');
    sinks.calibration?.({ type: 'finished', calibration: c });
    flushSync();
    expect(screen.getByTestId('calibration-recommended').textContent).toContain('v2 at ratio 0.6');
    expect((screen.getByRole('button', { name: 'Calibrate this model' }) as HTMLButtonElement).disabled).toBe(false);
    sinks.calibration?.({ type: 'error', message: 'No model file at "/nope.gguf".' });
    flushSync();
    expect(screen.getByText('No model file at "/nope.gguf".')).toBeTruthy();
  });

  it('loads every setting and the models in models/', async () => {
    render(SettingsPanel, { api: mockApi().api });
    expect((await screen.findByLabelText(/Context size/) as HTMLInputElement).value).toBe('4096');
    expect(input(/Generation reserve/).value).toBe('512');
    expect(input(/Threshold ratio/).value).toBe('0.8');
    expect(input(/Recent messages/).value).toBe('4');
    expect(input(/^γ/).value).toBe('1.5');
    expect(input(/Threads/).value).toBe('2');
    expect(input(/GPU/).checked).toBe(false);
    expect(input(/Thinking/).checked).toBe(true);
    expect((screen.getByLabelText(/Workspace roots/) as HTMLTextAreaElement).value).toBe('/work/data');
    expect((screen.getByLabelText(/Allowed hosts/) as HTMLTextAreaElement).value).toBe('127.0.0.1:8080');
    expect((screen.getByLabelText(/Strategy/) as HTMLSelectElement).value).toBe('v1');
    expect((screen.getByLabelText(/^code/) as HTMLSelectElement).value).toBe('deny');
    const models = (await screen.findByLabelText('Models in models/')) as HTMLSelectElement;
    expect([...models.options].map((o) => o.textContent)).toContain('gemma-3-270m-q4_k_m.gguf (241.3 MiB)');
    await vi.waitFor(() => expect(save().disabled).toBe(false));
    // run_code's state is said, not left out.
    expect((await screen.findByTestId('run-code-status')).textContent).toContain('run_code unavailable: the code sandbox is unavailable, so code is not run: mf-sandbox not found beside measured-forgetting');
  });

  it('shows a message per invalid field and refuses to save', async () => {
    const { api } = mockApi();
    render(SettingsPanel, { api });
    await screen.findByLabelText(/Context size/);
    await fireEvent.input(input(/Generation reserve/), { target: { value: '5000' } });
    await vi.waitFor(() => expect(field('reserve')?.textContent).toBe('Generation reserve must be smaller than the context size (4096).'));
    await fireEvent.input(input(/Threshold ratio/), { target: { value: '1.5' } });
    await vi.waitFor(() => expect(field('ratio')?.textContent).toContain('at most 1'));
    await fireEvent.input(screen.getByLabelText(/Allowed hosts/), { target: { value: 'http://evil.example/path' } });
    await vi.waitFor(() => expect(field('allowed_hosts')?.textContent).toContain('not a host name'));
    await fireEvent.input(screen.getByLabelText(/Workspace roots/), { target: { value: 'relative/dir' } });
    await vi.waitFor(() => expect(field('workspace_roots')?.textContent).toContain('absolute path'));
    await vi.waitFor(() => expect(save().disabled).toBe(true));
    await fireEvent.submit(save().closest('form')!);
    expect(api.saveSettings).not.toHaveBeenCalled();

    await fireEvent.input(input(/Generation reserve/), { target: { value: '256' } });
    await fireEvent.input(input(/Threshold ratio/), { target: { value: '0.75' } });
    await fireEvent.input(screen.getByLabelText(/Allowed hosts/), { target: { value: 'api.example.com\n\n127.0.0.1:9000' } });
    await fireEvent.input(screen.getByLabelText(/Workspace roots/), { target: { value: '/srv/a\n/srv/b' } });
    await vi.waitFor(() => expect(field('reserve')).toBeNull());
    await fireEvent.click(save());
    expect(api.saveSettings).toHaveBeenCalledTimes(1);
    const sent = vi.mocked(api.saveSettings).mock.calls[0]![0] as Settings;
    expect(sent).toMatchObject({ reserve: 256, ratio: 0.75, allowed_hosts: ['api.example.com', '127.0.0.1:9000'], workspace_roots: ['/srv/a', '/srv/b'] });
    expect((await screen.findByRole('status')).textContent).toBe('Saved.');
  });

  it("shows the shell's own per-field refusal", async () => {
    const { api } = mockApi({
      saveSettings: async () => {
        throw new ApiError({ code: 'invalid_settings', message: 'strategy v2 is not available in mf-agent yet', details: { fields: { strategy: 'v2 is not available yet; use none, baseline or v1' } } });
      },
    });
    render(SettingsPanel, { api });
    await screen.findByLabelText(/Context size/);
    await fireEvent.change(screen.getByLabelText(/Strategy/), { target: { value: 'v2' } });
    await fireEvent.click(save());
    expect((await screen.findByRole('status')).textContent).toBe('Not saved: strategy v2 is not available in mf-agent yet');
    await vi.waitFor(() => expect(field('strategy')?.textContent).toBe('v2 is not available yet; use none, baseline or v1'));
  });

  it('shows the download progress, resume point and the sha256 check', async () => {
    const m = mockApi();
    render(SettingsPanel, { api: m.api });
    await screen.findByLabelText(/Context size/);
    await fireEvent.click(screen.getByRole('button', { name: /Download Qwen3/ }));
    expect(m.api.downloadRecommendedModel).toHaveBeenCalled();
    const { flushSync } = await import('svelte');
    m.sinks.download?.({ type: 'progress', received: 2 * 1048576, total: 8 * 1048576, resumed_from: 1048576 });
    flushSync();
    expect(screen.getByTestId('download-status').textContent).toBe('2.0 / 8.0 MiB (resumed at 1.0 MiB)');
    expect((document.querySelector('progress') as HTMLProgressElement).value).toBe(2 * 1048576);
    m.sinks.download?.({ type: 'verifying' });
    flushSync();
    expect(screen.getByTestId('download-status').textContent).toBe('Checking sha256…');
    m.sinks.download?.({ type: 'done', path: '/models/Qwen3-8B-Q4_K_M.gguf', sha256: 'd98cdcbd03e17ce47681435b5150e34c1417f50b5c0019dd560e4882c5745785' });
    flushSync();
    expect(screen.getByTestId('download-status').textContent).toContain('sha256 d98cdcbd03e1… verified');
  });
});

// The native pickers go through the dialog plugin (mocked here: a GTK dialog
// cannot run in jsdom); what they return is checked like a typed path.
const dialog = vi.hoisted(() => ({ open: vi.fn() }));
vi.mock('@tauri-apps/plugin-dialog', () => dialog);

describe('SettingsPanel pickers (dialog plugin mocked)', () => {
  async function withPickers() {
    const { tauriApi } = await import('../src/lib/api');
    const m = mockApi({ pickModelFile: tauriApi.pickModelFile, pickFolder: tauriApi.pickFolder });
    render(SettingsPanel, { api: m.api });
    await screen.findByLabelText(/Context size/);
    return m;
  }

  it('puts the chosen .gguf file in the model field, validated like a typed path', async () => {
    dialog.open.mockReset();
    const m = await withPickers();
    dialog.open.mockResolvedValueOnce('/data/weights.bin');
    await fireEvent.click(screen.getByRole('button', { name: 'Choose file…' }));
    expect(dialog.open).toHaveBeenLastCalledWith(expect.objectContaining({ directory: false, multiple: false, filters: [{ name: 'GGUF model', extensions: ['gguf'] }] }));
    await vi.waitFor(() => expect(input(/Model file/).value).toBe('/data/weights.bin'));
    await vi.waitFor(() => expect(field('model_path')?.textContent).toBe('The model must be a .gguf file.'));
    await vi.waitFor(() => expect(save().disabled).toBe(true));

    dialog.open.mockResolvedValueOnce('/data/Qwen3-8B-Q4_K_M.gguf');
    await fireEvent.click(screen.getByRole('button', { name: 'Choose file…' }));
    await vi.waitFor(() => expect(input(/Model file/).value).toBe('/data/Qwen3-8B-Q4_K_M.gguf'));
    await vi.waitFor(() => expect(field('model_path')).toBeNull());
    // Cancelling the dialog (null) keeps the current choice.
    dialog.open.mockResolvedValueOnce(null);
    await fireEvent.click(screen.getByRole('button', { name: 'Choose file…' }));
    await fireEvent.click(save());
    expect(vi.mocked(m.api.saveSettings).mock.calls[0]![0].model_path).toBe('/data/Qwen3-8B-Q4_K_M.gguf');
  });

  it('adds a chosen folder to the workspace roots once, and reports a failed dialog', async () => {
    dialog.open.mockReset();
    const m = await withPickers();
    const roots = () => (screen.getByLabelText(/Workspace roots/) as HTMLTextAreaElement).value;
    dialog.open.mockResolvedValue('/srv/logs');
    await fireEvent.click(screen.getByRole('button', { name: 'Add folder…' }));
    expect(dialog.open).toHaveBeenLastCalledWith(expect.objectContaining({ directory: true, multiple: false }));
    await vi.waitFor(() => expect(roots()).toBe('/work/data\n/srv/logs'));
    await fireEvent.click(screen.getByRole('button', { name: 'Add folder…' }));
    await new Promise((r) => setTimeout(r, 0));
    expect(roots()).toBe('/work/data\n/srv/logs');
    await fireEvent.click(save());
    expect(vi.mocked(m.api.saveSettings).mock.calls[0]![0].workspace_roots).toEqual(['/work/data', '/srv/logs']);

    dialog.open.mockRejectedValueOnce('no display');
    await fireEvent.click(screen.getByRole('button', { name: 'Add folder…' }));
    expect((await screen.findByRole('status')).textContent).toBe('Folder dialog failed: no display');
  });

  it('switches to a server engine: URL and model are checked, the model list comes from the server, the key stays in memory', async () => {
    const { api } = mockApi();
    render(SettingsPanel, { api });
    const engine = (await screen.findByLabelText('Engine')) as HTMLSelectElement;
    await fireEvent.change(engine, { target: { value: 'openai' } });
    const url = (await screen.findByLabelText('Server URL')) as HTMLInputElement;
    await fireEvent.input(url, { target: { value: 'localhost:8080' } });
    await vi.waitFor(() => expect(field('server_url')?.textContent).toBe('The server URL must start with http:// or https://.'));
    await vi.waitFor(() => expect(field('server_model')?.textContent).toBe('Name the model the server should run.'));
    await vi.waitFor(() => expect(save().disabled).toBe(true));
    await fireEvent.input(url, { target: { value: 'http://127.0.0.1:8080/v1' } });
    await fireEvent.input(screen.getByLabelText('API key'), { target: { value: 'sk-test' } });
    await fireEvent.click(screen.getByRole('button', { name: "List the server's models" }));
    expect((await screen.findByTestId('server-status')).textContent).toBe('2 model(s) on the server.');
    expect(api.setApiKey).toHaveBeenCalledWith('sk-test');
    expect(api.listServerModels).toHaveBeenCalledWith('openai', 'http://127.0.0.1:8080/v1');
    await fireEvent.input(screen.getByLabelText('Server model'), { target: { value: 'qwen3:8b' } });
    await vi.waitFor(() => expect(field('server_url')).toBeNull());
    await vi.waitFor(() => expect(save().disabled).toBe(false));
    await fireEvent.click(save());
    const sent = (api.saveSettings as ReturnType<typeof vi.fn>).mock.calls.at(-1)?.[0] as Settings;
    expect(sent.engine).toBe('openai');
    expect(sent.server_model).toBe('qwen3:8b');
    expect(JSON.stringify(sent)).not.toContain('sk-test');
  });

  it('takes MCP servers as mcpServers JSON and refuses text that is not JSON', async () => {
    const { api } = mockApi();
    render(SettingsPanel, { api });
    const box = (await screen.findByLabelText(/MCP servers/)) as HTMLTextAreaElement;
    await fireEvent.input(box, { target: { value: '{"mcpServers": {' } });
    expect(field('mcp_servers')?.textContent).toMatch(/^Not valid JSON/);
    await vi.waitFor(() => expect(save().disabled).toBe(true));
    await fireEvent.input(box, { target: { value: '{"mcpServers": {"time": {"command": "mcp-server-time"}}}' } });
    await vi.waitFor(() => expect(field('mcp_servers')).toBeNull());
    await fireEvent.click(save());
    const sent = (api.saveSettings as ReturnType<typeof vi.fn>).mock.calls.at(-1)?.[0] as Settings;
    expect(sent.mcp_servers).toEqual({ mcpServers: { time: { command: 'mcp-server-time' } } });
  });
});
