/**
 * Changed copies of a recorded line, for the tests that hold the reader, the schema and replay()
 * to one story about hostile lines: a field set (or removed) by its path.
 */

// biome-ignore lint/suspicious/noExplicitAny: a test changes a line's fields freely
export type Loose = Record<string, any>;

/** Sets the field at `path` of `target` to a copy of `value`; `undefined` removes the field. */
export function setField(target: Loose, path: readonly string[], value: unknown): void {
  let holder = target;
  for (const key of path.slice(0, -1)) holder = holder[key];
  const last = path[path.length - 1] as string;
  if (value === undefined) delete holder[last];
  else holder[last] = structuredClone(value);
}

/** A copy of `line` with `change` applied to it. */
export function variant(line: unknown, change: (r: Loose) => void): unknown {
  const copy = structuredClone(line) as Loose;
  change(copy);
  return copy;
}

/**
 * A copy of `line` with each field named by its dotted path (`'dispatches.1.elapsedMs'`) set to
 * its value (`undefined` removes it).
 */
export function withFields(line: unknown, fields: Readonly<Record<string, unknown>>): unknown {
  return variant(line, (r) => {
    for (const [path, value] of Object.entries(fields)) setField(r, path.split('.'), value);
  });
}
