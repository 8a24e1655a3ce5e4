/**
 * Direct tests of a ConversationStore on a real server, shared by the PostgreSQL and Redis store
 * tests: every method, with the races the fencing exists for (two creates, two acquires, two
 * writers committing). `open()` makes a store on the test's server; each test uses its own ids.
 */
import { randomUUID } from 'node:crypto';
import { afterAll, describe, expect, it } from 'vitest';
import { newLeaseOwner } from '../../src/core/durable/lease-owner.ts';
import type { Checkpoint, ConversationStore, Lease } from '../../src/core/spi/store.ts';

export function checkpoint(
  conversationId: string,
  seq: number,
  fields: Partial<Checkpoint> = {},
): Checkpoint {
  return {
    conversationId,
    orchestrator: 'desks',
    status: 'running',
    seq,
    dispatchCount: seq - 1,
    state: JSON.stringify({ seq, text: `state ${seq} é☃` }),
    ...fields,
  };
}

/** An owner on another host: never taken as dead before its lease expires. */
export function remoteOwner(): string {
  return `elsewhere.example/1/${randomUUID()}`;
}

const LONG = 60_000;

export function storeCases(label: string, open: () => ConversationStore): void {
  describe(`${label}: every method of the store`, () => {
    const stores: ConversationStore[] = [];
    const store = () => {
      const s = open();
      stores.push(s);
      return s;
    };
    afterAll(async () => {
      await Promise.all(stores.map((s) => s.close()));
    });
    const id = () => `c-${randomUUID()}`;
    /** A fresh store with a new conversation (seq 1) created by `owner` for `leaseMs`: its id and lease. */
    const begun = async (owner = remoteOwner(), leaseMs = LONG) => {
      const s = store();
      const cid = id();
      const { lease } = (await s.create(checkpoint(cid, 1), owner, leaseMs)) as { lease: Lease };
      return { s, cid, owner, lease };
    };

    it('keeps every field of a created checkpoint and answers get() with them', async () => {
      const s = store();
      const cid = id();
      const owner = remoteOwner();
      const created = await s.create(checkpoint(cid, 1), owner, LONG);
      expect(created.created).toBe(true);
      const lease = (created as { lease: Lease }).lease;
      expect(lease.owner).toBe(owner);
      expect(lease.epoch).toBe(1);
      const got = await s.get(cid);
      expect(got).toEqual({
        conversationId: cid,
        orchestrator: 'desks',
        status: 'running',
        dispatchCount: 0,
        seq: 1,
        updatedAt: got?.updatedAt,
        owner,
        leaseExpiresAt: lease.expiresAt,
      });
      expect(Math.abs((got?.updatedAt as number) + LONG - lease.expiresAt)).toBeLessThanOrEqual(1);
      const acquired = await s.acquire(cid, owner, LONG);
      expect(acquired.status).toBe('acquired');
      if (acquired.status !== 'acquired') return;
      expect(acquired.checkpoint).toEqual(checkpoint(cid, 1));
      expect(acquired.lease.epoch).toBe(2);
      expect(acquired.takenOver).toBe(false);
    });

    it('answers created: false for an id that is taken, and exactly one of ten racing creates wins', async () => {
      const s = store();
      const cid = id();
      expect((await s.create(checkpoint(cid, 1), remoteOwner(), LONG)).created).toBe(true);
      expect(await s.create(checkpoint(cid, 1), remoteOwner(), LONG)).toEqual({ created: false });
      const racing = id();
      const others = [store(), store()];
      const answers = await Promise.all(
        Array.from({ length: 10 }, (_, i) =>
          (others[i % 2] as ConversationStore).create(
            checkpoint(racing, 1, { state: `"writer ${i}"` }),
            remoteOwner(),
            LONG,
          ),
        ),
      );
      const winners = answers.flatMap((a, i) => (a.created ? [i] : []));
      expect(winners).toHaveLength(1);
      const acquired = await s.acquire(racing, newLeaseOwner(), LONG);
      expect(acquired.status).toBe('held');
      expect((await s.get(racing))?.seq).toBe(1);
    });

    it('round-trips a suspended and an ended checkpoint through commit, get and acquire', async () => {
      const { s, cid, lease } = await begun();
      const suspended = checkpoint(cid, 2, { status: 'suspended', suspendedAt: 1_700_000_000_123 });
      const c1 = await s.commit(suspended, lease, LONG);
      expect(c1.ok).toBe(true);
      const got = await s.get(cid);
      expect(got?.status).toBe('suspended');
      expect(got?.suspendedAt).toBe(1_700_000_000_123);
      expect(got?.owner).toBeUndefined();
      expect(got?.leaseExpiresAt).toBeUndefined();
      // A suspended conversation's lease was released: taking it is a handoff, not a crash.
      const next = await s.acquire(cid, remoteOwner(), LONG);
      expect(next.status).toBe('acquired');
      if (next.status !== 'acquired') return;
      expect(next.takenOver).toBe(false);
      expect(next.checkpoint).toEqual(suspended);
      expect(next.lease.epoch).toBe(2);
      const result = JSON.stringify({ reason: 'converged', dispatchCount: 7 });
      const ended = checkpoint(cid, 3, { status: 'ended', dispatchCount: 7, result });
      expect((await s.commit(ended, next.lease, LONG)).ok).toBe(true);
      const stored = await s.get(cid);
      expect(stored).toMatchObject({ status: 'ended', seq: 3, dispatchCount: 7 });
      expect(stored?.result).toEqual({ reason: 'converged', dispatchCount: 7 });
      const again = await s.acquire(cid, remoteOwner(), LONG);
      expect(again).toEqual({ status: 'ended', checkpoint: ended });
      // Nothing commits after the end: its lease was released.
      const late = await s.commit(checkpoint(cid, 4), next.lease, LONG);
      expect(late).toEqual({ ok: false, reason: 'fenced', storedSeq: 3 });
    });

    it('refuses a commit whose seq is not the stored one plus 1, and one with no such conversation', async () => {
      const { s, cid, lease } = await begun();
      for (const seq of [3, 1]) {
        expect(await s.commit(checkpoint(cid, seq), lease, LONG)).toEqual({
          ok: false,
          reason: 'sequence',
          storedSeq: 1,
        });
      }
      const ok = await s.commit(checkpoint(cid, 2), lease, LONG);
      expect(ok.ok).toBe(true);
      expect(await s.commit(checkpoint(id(), 2), lease, LONG)).toEqual({
        ok: false,
        reason: 'not_found',
      });
      expect((await s.get(cid))?.seq).toBe(2);
    });

    it('gives the lease to exactly one of ten racing acquires, and refuses a live holder', async () => {
      const { s, cid, owner: first, lease } = await begun();
      expect(await s.acquire(cid, remoteOwner(), LONG)).toEqual({
        status: 'held',
        owner: first,
        leaseExpiresAt: lease.expiresAt,
      });
      await s.release(cid, lease);
      const others = [store(), store()];
      const answers = await Promise.all(
        Array.from({ length: 10 }, (_, i) =>
          (others[i % 2] as ConversationStore).acquire(cid, remoteOwner(), LONG),
        ),
      );
      const acquired = answers.filter((a) => a.status === 'acquired');
      expect(acquired).toHaveLength(1);
      expect(answers.filter((a) => a.status === 'held')).toHaveLength(9);
      expect(acquired[0]).toMatchObject({ takenOver: false, lease: { epoch: 2 } });
      expect(await s.acquire(id(), remoteOwner(), LONG)).toEqual({ status: 'not_found' });
    });

    it('lets another owner take an expired lease (takenOver), and fences the old holder', async () => {
      const { s, cid, lease: stale } = await begun(remoteOwner(), 1);
      await new Promise((r) => setTimeout(r, 20));
      // An expired lease nobody took still commits: the epoch fences, not the clock.
      const own = await s.commit(checkpoint(cid, 2), stale, 1);
      expect(own.ok).toBe(true);
      await new Promise((r) => setTimeout(r, 20));
      const taker = remoteOwner();
      const taken = await s.acquire(cid, taker, LONG);
      expect(taken).toMatchObject({ status: 'acquired', takenOver: true, lease: { epoch: 2 } });
      expect(await s.commit(checkpoint(cid, 3), stale, LONG)).toEqual({
        ok: false,
        reason: 'fenced',
        storedSeq: 2,
      });
      expect(await s.renew(cid, stale, LONG)).toBeUndefined();
      await s.release(cid, stale); // a stale release changes nothing
      expect((await s.get(cid))?.owner).toBe(taker);
    });

    it('takes at once a lease whose holder process on this host is gone', async () => {
      const s = store();
      const cid = id();
      // pid 2^22+1 is above Linux's pid_max: no such process.
      const dead = `${newLeaseOwner().split('/')[0]}/4194305/${randomUUID()}`;
      await s.create(checkpoint(cid, 1), dead, LONG);
      const taken = await s.acquire(cid, remoteOwner(), LONG);
      expect(taken).toMatchObject({ status: 'acquired', takenOver: true, lease: { epoch: 2 } });
    });

    it('lets exactly one of two writers commit the same seq, never a fork', async () => {
      const [a, b] = [store(), store()];
      for (let round = 0; round < 20; round++) {
        const cid = id();
        const old = ((await a.create(checkpoint(cid, 1), remoteOwner(), 1)) as { lease: Lease })
          .lease;
        await new Promise((r) => setTimeout(r, 3));
        const taken = await b.acquire(cid, remoteOwner(), LONG);
        if (taken.status !== 'acquired') throw new Error(`expected acquired, got ${taken.status}`);
        const mine = checkpoint(cid, 2, { state: '"a"' });
        const theirs = checkpoint(cid, 2, { state: '"b"' });
        const [ra, rb] = await Promise.all([
          a.commit(mine, old, LONG),
          (round % 2 === 0 ? a : b).commit(theirs, taken.lease, LONG),
        ]);
        expect(ra).toEqual({ ok: false, reason: 'fenced', storedSeq: expect.any(Number) });
        expect(rb.ok).toBe(true);
        const check = await b.acquire(cid, remoteOwner(), LONG);
        expect(check.status).toBe('held');
        const winner = await b.commit(checkpoint(cid, 3, { state: '"b3"' }), taken.lease, LONG);
        expect(winner.ok).toBe(true);
      }
    });

    it('renews a held lease from now and answers undefined once it is not the caller’s', async () => {
      const { s, cid, lease } = await begun(remoteOwner(), 1_000);
      const renewed = await s.renew(cid, lease, LONG);
      expect(renewed?.owner).toBe(lease.owner);
      expect(renewed?.epoch).toBe(1);
      expect((renewed?.expiresAt as number) - lease.expiresAt).toBeGreaterThanOrEqual(LONG - 1_000);
      expect((await s.get(cid))?.leaseExpiresAt).toBe(renewed?.expiresAt);
      await s.release(cid, lease);
      expect(await s.renew(cid, lease, LONG)).toBeUndefined();
      expect((await s.get(cid))?.owner).toBeUndefined();
    });

    it('deletes a conversation whatever its status and answers whether there was one', async () => {
      const s = store();
      const cid = id();
      await s.create(checkpoint(cid, 1), remoteOwner(), LONG);
      expect(await s.delete(cid)).toBe(true);
      expect(await s.delete(cid)).toBe(false);
      expect(await s.get(cid)).toBeUndefined();
      expect(await s.acquire(cid, remoteOwner(), LONG)).toEqual({ status: 'not_found' });
    });

    it('lists by orchestrator, status and lease, ordered by id, in pages', async () => {
      const s = store();
      const orchestrator = `o-${randomUUID()}`;
      const ids = Array.from({ length: 7 }, (_, i) => `${orchestrator}-${i}`);
      const leases: Lease[] = [];
      for (const cid of ids) {
        const { lease } = (await s.create(
          checkpoint(cid, 1, { orchestrator }),
          remoteOwner(),
          LONG,
        )) as { lease: Lease };
        leases.push(lease);
      }
      // 0-1 suspended, 2 ended, 3 released (running, unleased), 4-6 running and held.
      for (const i of [0, 1]) {
        await s.commit(
          checkpoint(ids[i] as string, 2, {
            orchestrator,
            status: 'suspended',
            suspendedAt: 1_000 + i,
          }),
          leases[i] as Lease,
          LONG,
        );
      }
      await s.commit(
        checkpoint(ids[2] as string, 2, { orchestrator, status: 'ended', result: '{"r":1}' }),
        leases[2] as Lease,
        LONG,
      );
      await s.release(ids[3] as string, leases[3] as Lease);
      const all = await s.list({ orchestrator, limit: 100 });
      expect(all.map((c) => c.conversationId)).toEqual(ids);
      const page1 = await s.list({ orchestrator, limit: 3 });
      const page2 = await s.list({ orchestrator, limit: 3, after: page1.at(-1)?.conversationId });
      expect([...page1, ...page2].map((c) => c.conversationId)).toEqual(ids.slice(0, 6));
      const running = await s.list({ orchestrator, status: 'running', limit: 100 });
      expect(running.map((c) => c.conversationId)).toEqual(ids.slice(3));
      const free = await s.list({ orchestrator, status: 'running', unleased: true, limit: 100 });
      expect(free.map((c) => c.conversationId)).toEqual([ids[3]]);
      const unleased = await s.list({ orchestrator, unleased: true, limit: 100 });
      expect(unleased.map((c) => c.conversationId)).toEqual(ids.slice(0, 4));
      const ended = await s.list({ orchestrator, status: 'ended', limit: 100 });
      expect(ended).toHaveLength(1);
      expect(ended[0]?.result).toEqual({ r: 1 });
      const suspended = await s.list({
        status: 'suspended',
        limit: 1_000,
        after: `${orchestrator}-`,
      });
      expect(suspended.slice(0, 2).map((c) => c.suspendedAt)).toEqual([1_000, 1_001]);
      expect(await s.list({ orchestrator, limit: 0 })).toEqual([]);
      const stats = (await s.stats()).find((x) => x.orchestrator === orchestrator);
      expect(stats).toEqual({ orchestrator, running: 4, suspended: 2, oldestSuspendedAt: 1_000 });
    });

    it('purges ended conversations past the retention and nothing else', async () => {
      const { s, cid, lease } = await begun();
      const runningId = id();
      await s.create(checkpoint(runningId, 1), remoteOwner(), LONG);
      await s.commit(checkpoint(cid, 2, { status: 'ended', result: '{}' }), lease, LONG);
      // This store's retention is long: the ended conversation stays.
      await s.purgeExpired();
      expect((await s.get(cid))?.status).toBe('ended');
      expect((await s.get(runningId))?.status).toBe('running');
    });

    it('rejects a checkpoint past its limit (maxSnapshotBytes on an incremental store) and an entry past maxCheckpointBytes with an error naming it, writing nothing', async () => {
      const s = store();
      const cid = id();
      const [limit, limitName] =
        s.maxSnapshotBytes === undefined
          ? [s.maxCheckpointBytes, 'maxCheckpointBytes']
          : [s.maxSnapshotBytes, 'maxSnapshotBytes'];
      const big = 'x'.repeat(limit + 1);
      await expect(
        s.create(checkpoint(cid, 1, { state: big }), remoteOwner(), LONG),
      ).rejects.toThrow(
        new RegExp(
          `create of conversation "${cid}" failed: its checkpoint is [\\d,]+ bytes \\(state \\+ result, UTF-8\\), past ${limitName}`,
        ),
      );
      expect(await s.get(cid)).toBeUndefined();
      const { lease } = (await s.create(checkpoint(cid, 1), remoteOwner(), LONG)) as {
        lease: Lease;
      };
      const half = 'y'.repeat(Math.floor(limit / 2));
      await expect(
        s.commit(checkpoint(cid, 2, { state: half, result: `${half}zz` }), lease, LONG),
      ).rejects.toThrow(new RegExp(`past ${limitName}`));
      // Recognized by its code, as every store error: not by its message.
      await expect(s.commit(checkpoint(cid, 2, { state: big }), lease, LONG)).rejects.toMatchObject(
        { name: 'StoreError', code: 'ERR_STORE_CHECKPOINT_TOO_LARGE' },
      );
      if (s.append !== undefined) {
        const entry = 'é'.repeat(Math.floor(s.maxCheckpointBytes / 2) + 1);
        await expect(
          s.append({ conversationId: cid, seq: 2, dispatchCount: 1, entry }, lease, LONG),
        ).rejects.toMatchObject({
          name: 'StoreError',
          code: 'ERR_STORE_CHECKPOINT_TOO_LARGE',
          message: expect.stringMatching(
            new RegExp(
              `append of conversation "${cid}" \\(seq 2\\) failed: its entry is [\\d,]+ bytes \\(UTF-8\\), past maxCheckpointBytes`,
            ),
          ),
        });
      }
      expect((await s.get(cid))?.seq).toBe(1);
    });

    it('rejects every call once closed, with an error saying so; close() twice is fine', async () => {
      const s = open();
      await s.get(id());
      await s.close();
      await s.close();
      await expect(s.get('x')).rejects.toThrow(/the store is closed/);
      await expect(
        s.commit(checkpoint('x', 2), { owner: 'o', epoch: 1, expiresAt: 0 }, 1),
      ).rejects.toThrow(/the store is closed/);
      await expect(s.get('x')).rejects.toMatchObject({ code: 'ERR_STORE_CLOSED' });
    });
  });
}
