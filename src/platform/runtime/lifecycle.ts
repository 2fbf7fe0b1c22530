/** Shared, mutable process state that request handling reads: set once SIGTERM arrives. */
export interface Lifecycle {
  draining: boolean;
}
