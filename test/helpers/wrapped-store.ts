/**
 * Stores with some methods replaced, for tests that watch or break what the core asks of a
 * store: a forwarding object (stores keep private fields, so a Proxy or a spread would not do).
 */
import type {
  CheckpointEntry,
  ConversationStore,
  IncrementalStore,
  MemoryStore,
} from '../../src/index.ts';

const METHODS = [
  'create',
  'acquire',
  'commit',
  'append',
  'snapshot',
  'renew',
  'release',
  'get',
  'delete',
  'list',
  'stats',
  'purgeExpired',
  'close',
] as const;

/** `store` with some of its methods replaced (a forwarding object: stores have private fields). */
export function wrap(
  store: ConversationStore,
  overrides: Partial<IncrementalStore>,
): IncrementalStore {
  const s = store as IncrementalStore;
  const forwarded: Record<string, unknown> = {
    name: s.name,
    maxCheckpointBytes: s.maxCheckpointBytes,
    maxSnapshotBytes: s.maxSnapshotBytes,
  };
  for (const method of METHODS) {
    forwarded[method] = (...args: unknown[]) =>
      (s[method] as (...a: unknown[]) => unknown).apply(s, args);
  }
  return Object.assign(forwarded, overrides) as unknown as IncrementalStore;
}

/** A store that counts what the core asks of it, and the bytes. */
export function counting(store: ConversationStore) {
  const calls = { commit: 0, append: 0, snapshot: 0, appendBytes: 0, wholeBytes: 0 };
  const s = store as IncrementalStore;
  const counted = wrap(store, {
    commit: (...args: Parameters<MemoryStore['commit']>) => {
      calls.commit++;
      calls.wholeBytes += args[0].state.length;
      return s.commit(...args);
    },
    append: (entry: CheckpointEntry, ...rest: [never, number]) => {
      calls.append++;
      calls.appendBytes += entry.entry.length;
      return s.append(entry, ...rest);
    },
    snapshot: (...args: Parameters<MemoryStore['snapshot']>) => {
      calls.snapshot++;
      return s.snapshot(...args);
    },
  });
  return { store: counted, calls };
}
