/**
 * JSON of a value the app hands us, within a budget: what `JSON.stringify` writes for ordinary
 * values (same keys, same order, `toJSON`, `undefined` and functions left out or `null` in
 * arrays), but a NaN or an infinity (which it writes as null), a cycle, a BigInt, a getter or Proxy that throws, a value nested deeper than
 * `MAX_DEPTH` or one whose JSON passes `budget` characters fails with a short reason instead of
 * throwing, hanging or allocating the whole of a 9 MB value first.
 */

/** Deeper values fail (`JSON.stringify` would overflow the stack somewhere past ~5,000). */
export const MAX_DEPTH = 64;

export type Serialized =
  | { readonly ok: true; readonly json: string | undefined }
  | { readonly ok: false; readonly reason: string };

class Failure {
  constructor(readonly reason: string) {}
}

/** JSON text of `value` in at most `budget` characters, or why not. `json` is undefined where `JSON.stringify` gives undefined. */
export function serializeBounded(value: unknown, budget: number): Serialized {
  // The common small cases (a number, a flag) without a writer.
  if (typeof value === 'number')
    return Number.isFinite(value)
      ? { ok: true, json: String(value) }
      : { ok: false, reason: nonFinite(value) };
  if (typeof value === 'boolean') return { ok: true, json: value ? 'true' : 'false' };
  if (value === null) return { ok: true, json: 'null' };
  if (value === undefined) return { ok: true, json: undefined };
  const writer = new Writer(budget);
  try {
    const written = writer.value(value, '', 0);
    return { ok: true, json: written ? writer.text() : undefined };
  } catch (error) {
    if (error instanceof Failure) return { ok: false, reason: error.reason };
    return { ok: false, reason: `reading it threw: ${describeThrown(error)}` };
  }
}

/** Why a NaN or an infinity cannot be recorded: JSON has neither (`JSON.stringify` writes null). */
function nonFinite(value: number): string {
  return `${value} is not JSON (JSON.stringify would write null)`;
}

/** A short description of a thrown value that never throws itself (a revoked Proxy, a getter). */
export function describeThrown(error: unknown): string {
  try {
    if (error instanceof Error) return `${error.name}: ${error.message}`.slice(0, 200);
    return `${typeof error}: ${String(error)}`.slice(0, 200);
  } catch {
    return 'a value that cannot be printed';
  }
}

class Writer {
  readonly #parts: string[] = [];
  readonly #budget: number;
  readonly #stack = new Set<object>();
  #length = 0;

  constructor(budget: number) {
    this.#budget = budget;
  }

  text(): string {
    return this.#parts.join('');
  }

  #put(text: string): void {
    this.#length += text.length;
    if (this.#length > this.#budget) throw new Failure(`longer than ${this.#budget} characters`);
    this.#parts.push(text);
  }

  /** Writes `value` (as the member `key` of its holder); false when JSON leaves it out. */
  value(input: unknown, key: string, depth: number): boolean {
    let value = input;
    if ((typeof value === 'object' && value !== null) || typeof value === 'bigint') {
      const toJSON = (value as { toJSON?: unknown }).toJSON;
      if (typeof toJSON === 'function') value = toJSON.call(value, key);
    }
    switch (typeof value) {
      case 'string':
        if (value.length + 2 > this.#budget - this.#length) {
          throw new Failure(`longer than ${this.#budget} characters`);
        }
        this.#put(JSON.stringify(value));
        return true;
      case 'number':
        // JSON.stringify writes null, which a candidate would read as 0 (null < 0.5): refused.
        if (!Number.isFinite(value)) throw new Failure(nonFinite(value));
        this.#put(String(value));
        return true;
      case 'boolean':
        this.#put(value ? 'true' : 'false');
        return true;
      case 'bigint':
        throw new Failure('a BigInt is not JSON');
      case 'undefined':
      case 'function':
      case 'symbol':
        return false;
    }
    if (value === null) {
      this.#put('null');
      return true;
    }
    if (value instanceof Number || value instanceof String || value instanceof Boolean) {
      return this.value(value.valueOf(), key, depth);
    }
    if (depth >= MAX_DEPTH) throw new Failure(`nested deeper than ${MAX_DEPTH}`);
    const object = value as object;
    if (this.#stack.has(object)) throw new Failure('cyclic');
    this.#stack.add(object);
    if (Array.isArray(object)) this.#array(object, depth);
    else this.#object(object as Record<string, unknown>, depth);
    this.#stack.delete(object);
    return true;
  }

  #array(array: readonly unknown[], depth: number): void {
    this.#put('[');
    const length = array.length;
    for (let i = 0; i < length; i++) {
      if (i > 0) this.#put(',');
      if (!this.value(array[i], String(i), depth + 1)) this.#put('null');
    }
    this.#put(']');
  }

  #object(object: Record<string, unknown>, depth: number): void {
    this.#put('{');
    let first = true;
    for (const key of Object.keys(object)) {
      if (key.length + 3 > this.#budget - this.#length) {
        throw new Failure(`longer than ${this.#budget} characters`);
      }
      const mark = this.#parts.length;
      const length = this.#length;
      this.#put(first ? JSON.stringify(key) : `,${JSON.stringify(key)}`);
      this.#put(':');
      if (this.value(object[key], key, depth + 1)) first = false;
      else {
        // Left out, as JSON.stringify leaves out undefined and functions.
        this.#parts.length = mark;
        this.#length = length;
      }
    }
    this.#put('}');
  }
}
