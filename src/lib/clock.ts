/** The clock port: services never call Date.now() directly, so tests can move time instead of sleeping. */
export interface Clock {
  now(): number;
}

export const systemClock: Clock = { now: () => Date.now() };

export class FakeClock implements Clock {
  constructor(private t = Date.UTC(2026, 0, 1)) {}
  now() {
    return this.t;
  }
  set(t: number) {
    this.t = t;
  }
  advance(ms: number) {
    this.t += ms;
  }
}

export const toIso = (ms: number) => new Date(ms).toISOString();
