/** The calls a store has under way, so that `close()` lets them finish before the client goes. */
export class InFlight {
  readonly #calls = new Set<Promise<unknown>>();

  /** `call`, remembered until it settles. */
  track<T>(call: Promise<T>): Promise<T> {
    this.#calls.add(call);
    const forget = () => this.#calls.delete(call);
    call.then(forget, forget);
    return call;
  }

  /** Resolves once every tracked call has settled, those started meanwhile included. */
  async drain(): Promise<void> {
    while (this.#calls.size > 0) await Promise.allSettled([...this.#calls]);
  }
}
