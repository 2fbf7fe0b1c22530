// The development identity provider lives in scripts/dev/ (the demo uses it too).
export * from '../../scripts/dev/idp.js';
