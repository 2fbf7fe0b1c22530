// The webhook receiver lives in scripts/dev/ (the demo uses it too).
export * from '../../scripts/dev/receiver.js';
