/** Milliseconds since the epoch. The one clock of the service: commands take it as an argument, tests inject their own. */
export type Clock = () => number;

export const systemClock: Clock = () => Date.now();
