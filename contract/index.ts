/**
 * What the API and the signer must agree on, in one place both import as values: the signing
 * methods, the policy catalogue and limits, the shared size bounds, the signer's routes and its
 * request and answer shapes. It imports nothing outside this folder (ESLint holds it), so both
 * processes can load it without loading each other.
 */
export * from './bounds.js';
export * from './json-names.js';
export * from './messages.js';
export * from './policy.js';
export * from './routes.js';
export * from './service.js';
export * from './signing.js';
