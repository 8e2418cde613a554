// Checks a settings form before it is sent. The shell validates again (and
// its `{code, message, details.fields}` errors are shown the same way); these
// checks only catch what is wrong on its face, with a message per field.

import { STRATEGIES, type Settings } from './api';

export type FieldErrors = Partial<Record<keyof Settings, string>>;

const isInt = (n: number): boolean => Number.isInteger(n);

/** A host name, an IPv4 address or a bracketed IPv6 address, optionally with a port. */
const HOST_RE = /^(?:\[[0-9a-fA-F:.]+\]|(?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*)(?::\d{1,5})?$/;

export function validateSettings(s: Settings): FieldErrors {
  const e: FieldErrors = {};
  const engine = s.engine ?? 'embedded';
  if (engine !== 'embedded') {
    const url = (s.server_url ?? '').trim();
    if (!/^https?:\/\/\S+$/.test(url)) e.server_url = 'The server URL must start with http:// or https://.';
    if ((s.server_model ?? '').trim() === '') e.server_model = 'Name the model the server should run.';
  } else if (s.model_path.trim() === '') e.model_path = 'Choose a model file.';
  else if (!s.model_path.toLowerCase().endsWith('.gguf')) e.model_path = 'The model must be a .gguf file.';

  if (!isInt(s.context) || s.context < 512) e.context = 'Context size must be a whole number of at least 512 tokens.';
  if (!isInt(s.reserve) || s.reserve < 1) e.reserve = 'Generation reserve must be a whole number of at least 1 token.';
  else if (isInt(s.context) && s.reserve >= s.context)
    e.reserve = `Generation reserve must be smaller than the context size (${s.context}).`;
  if (!Number.isFinite(s.ratio) || s.ratio <= 0 || s.ratio > 1) e.ratio = 'Threshold ratio must be above 0 and at most 1.';
  if (!isInt(s.recent) || s.recent < 0) e.recent = 'Recent messages must be a whole number, 0 or more.';
  if (!(STRATEGIES as readonly string[]).includes(s.strategy))
    e.strategy = `Unknown strategy; choose one of ${STRATEGIES.join(', ')}.`;
  if (!Number.isFinite(s.gamma) || s.gamma <= 0 || s.gamma > 4) e.gamma = 'γ must be above 0 and at most 4 (the method uses 1.5).';
  if (!isInt(s.threads) || s.threads < 1 || s.threads > 256) e.threads = 'Threads must be a whole number from 1 to 256.';

  for (const [tool, mode] of Object.entries(s.tool_approvals)) {
    if (mode !== 'ask' && mode !== 'allow' && mode !== 'deny') {
      e.tool_approvals = `Approval for ${tool} must be ask, allow or deny.`;
      break;
    }
  }
  for (const root of s.workspace_roots) {
    if (!root.startsWith('/') && !/^[A-Za-z]:[\\/]/.test(root)) {
      e.workspace_roots = `Workspace root "${root}" must be an absolute path.`;
      break;
    }
    if (root.split(/[\\/]/).includes('..')) {
      e.workspace_roots = `Workspace root "${root}" must not contain "..".`;
      break;
    }
  }
  for (const host of s.allowed_hosts) {
    if (!HOST_RE.test(host)) {
      e.allowed_hosts = `"${host}" is not a host name or address (no scheme, no path).`;
      break;
    }
    const port = host.match(/:(\d+)$/);
    if (port && !host.startsWith('[') && Number(port[1]) > 65535) {
      e.allowed_hosts = `"${host}" has a port above 65535.`;
      break;
    }
  }
  return e;
}

/** One entry per non-empty line. */
export function lines(text: string): string[] {
  return text
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l !== '');
}
