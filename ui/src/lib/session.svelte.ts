// One investigation as the app holds it: its id, the folded events, and the
// actions that call the backend.

import type { Api } from './api';
import { toApiError } from './api';
import type { AgentEvent } from './events';
import { applyEvent, emptyState, type InvestigationState } from './investigation';

export class Session {
  id = $state<number | null>(null);
  state = $state<InvestigationState>(emptyState());
  running = $state(false);
  error = $state<string | null>(null);
  readonly api: Api;

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
  }

  async start(question: string): Promise<void> {
    this.reset();
    this.running = true;
    try {
      this.id = await this.api.startInvestigation(question, this.onEvent);
    } catch (e) {
      this.running = false;
      this.error = toApiError(e).message;
    }
  }

  async stop(): Promise<void> {
    if (this.id === null) return;
    try {
      await this.api.stopInvestigation(this.id);
    } catch (e) {
      this.error = toApiError(e).message;
    }
  }

  async decide(callId: string, argumentsHash: string, approved: boolean): Promise<void> {
    if (this.id === null) return;
    try {
      await this.api.approve(this.id, callId, argumentsHash, approved);
    } catch (e) {
      this.error = toApiError(e).message;
    }
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
    try {
      this.id = await this.api.resumeInvestigation(id, this.onEvent);
    } catch (e) {
      this.running = false;
      this.error = toApiError(e).message;
    }
  }
}
