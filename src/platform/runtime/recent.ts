/**
 * Sets `key` as the most recently used entry of `map` and drops the least recently used beyond
 * `max`: a Map keeps insertion order, so its first key is the oldest. The bounded caches of the
 * API process share it.
 */
export function setRecent<K, V>(map: Map<K, V>, key: K, value: V, max: number): void {
  map.delete(key);
  map.set(key, value);
  while (map.size > max) {
    const oldest = map.keys().next();
    if (oldest.done) break;
    map.delete(oldest.value);
  }
}
