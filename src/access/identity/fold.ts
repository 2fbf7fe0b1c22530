/**
 * The identity key of an e-mail claim (docs/interface.md section 5): ASCII letters A-Z folded to a-z,
 * nothing else changed. Full Unicode case mapping (`toLowerCase`) merges distinct people (the
 * Kelvin sign folds to `k`, `İ` to `i̇`), so it is never used on an identity. The database side
 * is `translate(email, 'A..Z', 'a..z')` (migrations/20261124010000_ascii_identity_fold.ts).
 */
export function foldIdentity(email: string): string {
  // A fast path: most claims are already lower case.
  if (!/[A-Z]/.test(email)) return email;
  return email.replace(/[A-Z]+/g, (upper) => upper.toLowerCase());
}
