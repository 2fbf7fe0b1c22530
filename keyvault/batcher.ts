/**
 * Groups calls made while earlier ones are in flight into one request: no added latency when
 * idle, fewer round trips under load. Up to `parallel` batches run at once, each of at most
 * `maxSize` items; `run` answers item by item (an Error for an item fails only that item).
 */
export class Batcher<I, O> {
  readonly #queue: Array<{ item: I; resolve: (o: O) => void; reject: (e: unknown) => void }> = [];
  #running = 0;

  constructor(
    private readonly run: (items: I[]) => Promise<Array<O | Error>>,
    private readonly maxSize = 64,
    private readonly parallel = 4,
  ) {}

  add(item: I): Promise<O> {
    return new Promise<O>((resolve, reject) => {
      this.#queue.push({ item, resolve, reject });
      this.#drain();
    });
  }

  #drain(): void {
    while (this.#running < this.parallel && this.#queue.length > 0) {
      const batch = this.#queue.splice(0, this.maxSize);
      this.#running++;
      this.run(batch.map((b) => b.item))
        .then(
          (results) => {
            batch.forEach((b, i) => {
              const r = results[i];
              if (r === undefined) b.reject(new Error('batch answer too short'));
              else if (r instanceof Error) b.reject(r);
              else b.resolve(r);
            });
          },
          (err: unknown) => batch.forEach((b) => b.reject(err)),
        )
        .finally(() => {
          this.#running--;
          this.#drain();
        });
    }
  }
}
