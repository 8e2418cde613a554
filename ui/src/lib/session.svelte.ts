// One investigation as the app holds it: its id, the folded events, and the
// actions that call the backend.

import type { Api, ApprovalScope, MessageCard } from './api';
import { toApiError } from './api';
import type { AgentEvent } from './events';
import { applyEvent, emptyState, type InvestigationState } from './investigation';

export class Session {
  id = $state<number | null>(null);
  state = $state<InvestigationState>(emptyState());
  running = $state(false);
  error = $state<string | null>(null);
  /** The stored history, one card per message, while the investigation is stopped (null: not loaded). */
  history = $state<MessageCard[] | null>(null);
  /** A pin or a compaction by hand is on its way. */
  handBusy = $state(false);
  /** What the last compaction by hand did, or why it changed nothing. */
  handNote = $state<string | null>(null);
  readonly api: Api;
  /** The pending start or resume: events (and approval requests) can stream in before it returns the id. */
  private pending: Promise<number> | null = null;

  constructor(api: Api) {
    this.api = api;
  }

  private onEvent = (e: AgentEvent): void => {
    applyEvent(this.state, e);
    if (e.type === 'exit') this.running = false;
  };

  private reset(): void {
    this.state = emptyState();
    this.error = null;
    this.id = null;
    this.history = null;
    this.handNote = null;
  }

  async start(question: string): Promise<void> {
    this.reset();
    this.running = true;
    await this.track(this.api.startInvestigation(question, this.onEvent));
  }

  /** Puts a finished or reopened investigation away: the view shows the empty state again. */
  clear(): void {
    if (this.running) return;
    this.reset();
  }

  /** Starts an investigation of a demo world (served by the app for this run only). */
  async startDemo(world: string): Promise<void> {
    this.reset();
    this.running = true;
    await this.track(this.api.startDemo(world, this.onEvent));
  }

  private async track(p: Promise<number>): Promise<void> {
    this.pending = p;
    try {
      this.id = await p;
    } catch (e) {
      this.running = false;
      this.error = toApiError(e).message;
    } finally {
      if (this.pending === p) this.pending = null;
    }
  }

  /** The investigation's id, waiting for a start that has not returned yet. */
  private async currentId(): Promise<number | null> {
    if (this.id === null && this.pending) {
      try {
        return await this.pending;
      } catch {
        return null;
      }
    }
    return this.id;
  }

  async stop(): Promise<void> {
    const id = await this.currentId();
    if (id === null) return;
    try {
      await this.api.stopInvestigation(id);
    } catch (e) {
      this.error = toApiError(e).message;
    }
  }

  async decide(callId: string, argumentsHash: string, approved: boolean, scope?: ApprovalScope): Promise<void> {
    const id = await this.currentId();
    if (id === null) return;
    try {
      if (scope === undefined) await this.api.approve(id, callId, argumentsHash, approved);
      else await this.api.approve(id, callId, argumentsHash, approved, scope);
    } catch (e) {
      this.error = toApiError(e).message;
    }
  }

  /** Loads the stored history's cards (the investigation must be stopped to change it). */
  async loadHistory(): Promise<void> {
    const id = this.id;
    if (id === null) return;
    try {
      this.history = await this.api.investigationHistory(id);
    } catch (e) {
      this.error = toApiError(e).message;
    }
  }

  /** Runs one change by hand between rounds, then shows the stored history again. */
  private async byHand(change: (id: number) => Promise<void>): Promise<void> {
    const id = this.id;
    if (id === null || this.running || this.handBusy) return;
    this.handBusy = true;
    this.error = null;
    this.handNote = null;
    try {
      await change(id);
    } catch (e) {
      this.error = toApiError(e).message;
    } finally {
      this.handBusy = false;
    }
    await this.loadHistory();
  }

  /** Keeps message `message` verbatim (`pinned`), or lets it be compacted again. */
  async pin(message: string, pinned: boolean): Promise<void> {
    await this.byHand(async (id) => {
      await this.api.pinMessage(id, message, pinned, this.onEvent);
    });
  }

  /** Compacts now (`upTo` null) or up to message `upTo`, with `strategy` or the investigation's own. */
  async compactByHand(upTo: string | null, strategy: string | null): Promise<void> {
    await this.byHand(async (id) => {
      const r = await this.api.compactInvestigation(id, upTo, strategy, this.onEvent);
      this.handNote = r.unchanged
        ? `Not compacted: ${r.unchanged}`
        : `Compacted ${upTo ? `up to ${upTo}` : 'now'}: ${r.tokens_before.toLocaleString('en-US')} → ${r.tokens_after.toLocaleString('en-US')} prompt tokens.`;
    });
  }

  /** Shows a stored investigation by replaying its events. */
  async reopen(id: number): Promise<void> {
    this.reset();
    this.running = false;
    try {
      const events = await this.api.investigationEvents(id);
      for (const e of events) applyEvent(this.state, e);
      this.id = id;
    } catch (e) {
      this.error = toApiError(e).message;
    }
  }

  /** Replays a stored investigation, then continues it live. */
  async resume(id: number): Promise<void> {
    await this.reopen(id);
    if (this.error) return;
    this.running = true;
    await this.track(this.api.resumeInvestigation(id, this.onEvent));
  }
}
