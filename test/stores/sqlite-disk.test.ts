/**
 * The SQLite store on a file system that fails it: a full one (a 1 MB tmpfs) and a read-only one.
 * Clear errors naming the store, the file and what failed; nothing half-written. Needs root (to
 * mount the tmpfs); skipped otherwise.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { Checkpoint, Lease } from '../../src/core/spi/store.ts';
import { createSqliteStore } from '../../src/stores/sqlite/index.ts';
import { checkedRows } from '../helpers/sqlite-rows.ts';

const ROOT = process.getuid?.() === 0;

/** Runs `run` on a fresh 1 MB tmpfs; the stores it opened through `open` are closed before the unmount. */
async function onTinyFilesystem(
  run: (dir: string, open: typeof createSqliteStore) => Promise<void>,
): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'store-sqlite-disk-'));
  execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=1m', 'tmpfs', dir]);
  const stores: ReturnType<typeof createSqliteStore>[] = [];
  try {
    await run(dir, (options) => {
      const store = createSqliteStore(options);
      stores.push(store);
      return store;
    });
  } finally {
    for (const store of stores) await store.close();
    execFileSync('umount', [dir]);
    rmSync(dir, { recursive: true, force: true });
  }
}

const cp = (id: string, seq: number, padBytes: number): Checkpoint => ({
  conversationId: id,
  orchestrator: 'disk',
  status: 'running',
  seq,
  dispatchCount: seq - 1,
  state: JSON.stringify({ id, seq, pad: 'y'.repeat(padBytes) }),
});
const OWNER = 'other-host.invalid/1/a';

describe.skipIf(!ROOT)('the SQLite store on a failing file system', () => {
  it('rejects commits on a full disk with a clear error, writes none of a failed group, and works again once space is freed', async () => {
    await onTinyFilesystem(async (dir, open) => {
      const path = join(dir, 'full.db');
      // Another file's bytes, removed later to free space (a full WAL database cannot delete rows).
      const ballast = join(dir, 'ballast');
      writeFileSync(ballast, Buffer.alloc(300_000));
      const store = open({ path });
      const leases = new Map<string, Lease>();
      let failure: Error | undefined;
      for (let i = 0; failure === undefined && i < 100; i++) {
        const id = `c${String(i).padStart(2, '0')}`;
        await store.create(cp(id, 1, 50_000), OWNER, 60_000).then(
          (outcome) => {
            if (outcome.created) leases.set(id, outcome.lease);
          },
          (error: Error) => {
            failure = error;
          },
        );
      }
      const failedId = `c${String(leases.size).padStart(2, '0')}`;
      expect(failure?.message).toBe(
        `sqlite store: create (conversations ${failedId}) failed on ${path}: database or disk is full [SQLITE_FULL: the disk is full]`,
      );
      expect((failure?.cause as { code?: string } | undefined)?.code).toBe('SQLITE_FULL');
      expect(await store.get(failedId)).toBeUndefined();

      // A group of commits that cannot fit: all rejected, every stored seq unchanged.
      const outcomes = await Promise.allSettled(
        [...leases].map(([id, lease]) => store.commit(cp(id, 2, 200_000), lease, 60_000)),
      );
      expect(new Set(outcomes.map((o) => o.status))).toEqual(new Set(['rejected']));
      const seqs = await store.list({ orchestrator: 'disk', limit: 100 });
      expect(seqs.map((c) => c.seq)).toEqual([...leases.keys()].map(() => 1));

      // Space freed: the store goes on.
      rmSync(ballast);
      const [id, lease] = [...leases][1] as [string, Lease];
      expect((await store.commit(cp(id, 2, 100), lease, 60_000)).ok).toBe(true);
      expect(await store.delete([...leases.keys()][0] as string)).toBe(true);
      await store.close();

      const rows = checkedRows(path, { readonly: true });
      expect(rows.length).toBe(leases.size - 1);
      expect(rows.find((r) => r.id === id)?.seq).toBe(2);
      for (const row of rows) {
        expect(JSON.parse(row.state)).toMatchObject({ id: row.id, seq: row.seq });
      }
    });
  });

  it('refuses to open a file on a read-only file system, naming the store, the file and what failed', async () => {
    await onTinyFilesystem(async (dir) => {
      const path = join(dir, 'ro.db');
      await createSqliteStore({ path }).close();
      execFileSync('mount', ['-o', 'remount,ro', dir]);
      expect(() => createSqliteStore({ path })).toThrow(
        `sqlite store: opening the database failed on ${path}: unable to open database file [SQLITE_CANTOPEN: the file or its WAL cannot be opened for writing (a missing directory, or a read-only file or file system?)]`,
      );
    });
  });
});
