/**
 * A test-only ConversationStore kept in one JSON file, written by atomic rename, so that it
 * outlives a process killed with SIGKILL (the crash property's store). One process at a time:
 * no locking. `hooks.beforeWrite`/`afterWrite` let a child kill itself mid-commit.
 */
import { readFileSync, renameSync, writeFileSync } from 'node:fs';
import {
  type AcquireOutcome,
  type Checkpoint,
  type ConversationStore,
  isLeaseOwnerAlive,
  type StoredConversation,
} from '../../src/index.ts';

interface Row {
  checkpoint: Checkpoint;
  owner: string | null;
  epoch: number;
  expiresAt: number;
  updatedAt: number;
}

export function createFileStore(
  file: string,
  hooks: { beforeWrite?: () => void; afterWrite?: () => void } = {},
): ConversationStore {
  const load = (): Record<string, Row> => {
    try {
      return JSON.parse(readFileSync(file, 'utf8')) as Record<string, Row>;
    } catch {
      return {};
    }
  };
  const save = (rows: Record<string, Row>): void => {
    hooks.beforeWrite?.();
    writeFileSync(`${file}.tmp`, JSON.stringify(rows));
    renameSync(`${file}.tmp`, file);
    hooks.afterWrite?.();
  };
  const lease = (row: Row) => ({
    owner: row.owner as string,
    epoch: row.epoch,
    expiresAt: row.expiresAt,
  });
  const describe = (row: Row): StoredConversation => ({
    conversationId: row.checkpoint.conversationId,
    orchestrator: row.checkpoint.orchestrator,
    status: row.checkpoint.status,
    dispatchCount: row.checkpoint.dispatchCount,
    seq: row.checkpoint.seq,
    updatedAt: row.updatedAt,
    ...(row.checkpoint.result === undefined ? {} : { result: JSON.parse(row.checkpoint.result) }),
  });
  const live = (row: Row): boolean =>
    row.owner !== null && row.expiresAt > Date.now() && isLeaseOwnerAlive(row.owner);
  return {
    name: 'file',
    maxCheckpointBytes: 1 << 24,
    async create(checkpoint, owner, leaseMs) {
      const rows = load();
      if (rows[checkpoint.conversationId] !== undefined) return { created: false };
      const row: Row = {
        checkpoint,
        owner,
        epoch: 1,
        expiresAt: Date.now() + leaseMs,
        updatedAt: Date.now(),
      };
      rows[checkpoint.conversationId] = row;
      save(rows);
      return { created: true, lease: lease(row) };
    },
    async acquire(id, owner, leaseMs): Promise<AcquireOutcome> {
      const rows = load();
      const row = rows[id];
      if (row === undefined) return { status: 'not_found' };
      if (row.checkpoint.status === 'ended') return { status: 'ended', checkpoint: row.checkpoint };
      if (row.owner !== null && row.owner !== owner && live(row)) {
        return { status: 'held', owner: row.owner, leaseExpiresAt: row.expiresAt };
      }
      const takenOver = row.owner !== null && row.owner !== owner;
      row.owner = owner;
      row.epoch++;
      row.expiresAt = Date.now() + leaseMs;
      save(rows);
      return { status: 'acquired', checkpoint: row.checkpoint, lease: lease(row), takenOver };
    },
    async commit(checkpoint, held, leaseMs) {
      const rows = load();
      const row = rows[checkpoint.conversationId];
      if (row === undefined) return { ok: false, reason: 'not_found' };
      if (row.owner !== held.owner || row.epoch !== held.epoch)
        return { ok: false, reason: 'fenced' };
      if (checkpoint.seq !== row.checkpoint.seq + 1) return { ok: false, reason: 'sequence' };
      row.checkpoint = checkpoint;
      row.updatedAt = Date.now();
      const answer = lease(row);
      if (checkpoint.status === 'running') row.expiresAt = Date.now() + leaseMs;
      else row.owner = null;
      save(rows);
      return { ok: true, lease: { ...answer, expiresAt: row.expiresAt } };
    },
    async renew(id, held, leaseMs) {
      const rows = load();
      const row = rows[id];
      if (row === undefined || row.owner !== held.owner || row.epoch !== held.epoch)
        return undefined;
      row.expiresAt = Date.now() + leaseMs;
      save(rows);
      return lease(row);
    },
    async release(id, held) {
      const rows = load();
      const row = rows[id];
      if (row === undefined || row.owner !== held.owner || row.epoch !== held.epoch) return;
      row.owner = null;
      save(rows);
    },
    async get(id) {
      const row = load()[id];
      return row === undefined ? undefined : describe(row);
    },
    async delete(id) {
      const rows = load();
      if (rows[id] === undefined) return false;
      delete rows[id];
      save(rows);
      return true;
    },
    async list(query) {
      return Object.values(load())
        .filter(
          (row) =>
            (query.orchestrator === undefined ||
              row.checkpoint.orchestrator === query.orchestrator) &&
            (query.status === undefined || row.checkpoint.status === query.status) &&
            (query.unleased !== true || !live(row)) &&
            (query.after === undefined || row.checkpoint.conversationId > query.after),
        )
        .sort((a, b) => (a.checkpoint.conversationId < b.checkpoint.conversationId ? -1 : 1))
        .slice(0, query.limit)
        .map(describe);
    },
    async stats() {
      return [];
    },
    async purgeExpired() {
      return 0;
    },
    async close() {},
  };
}
