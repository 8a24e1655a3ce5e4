/** Checks of a store's bounds: retention, many conversations at once, the size limit, close. */
import assert from 'node:assert/strict';
import type { Checkpoint, ConversationStore, Lease } from '../core/spi/store.ts';
import {
  type Check,
  checkpoint,
  incremental,
  jsonOfBytes,
  LONG_LEASE_MS,
  SNAPSHOT_LIMIT,
  sleep,
  wholeCheckpointLimit,
} from './kit.ts';
import { begun, committed, created } from './steps.ts';

const RETENTION_MS = 1_000;
const COMMITS_EACH = 5;
const CONVERSATIONS = 1_000;

/**
 * An incremental store's whole checkpoints are bounded by maxSnapshotBytes, which the size checks
 * ask the factory to set to `SNAPSHOT_LIMIT`: one far larger (the 256 MiB default) was not
 * applied, and writing it would cost the check minutes, which is said as such.
 */
export function snapshotLimitApplied(store: ConversationStore, limit: number): void {
  if (incremental(store) !== undefined && limit > 2 * SNAPSHOT_LIMIT) {
    assert.fail(
      `the store factory did not apply maxSnapshotBytes (${SNAPSHOT_LIMIT} bytes): the store's is ${limit}. A factory that cannot honour it may skip this check: verifyConversationStore(factory, { skip: [name of this check] })`,
    );
  }
}

/** Rejects (or throws): the error, else a failed assertion. */
export async function rejection(what: string, call: () => Promise<unknown>): Promise<Error> {
  try {
    await call();
  } catch (error) {
    assert.ok(error instanceof Error, `${what} should reject with an Error, got ${String(error)}`);
    assert.ok(error.message.length > 0, `${what} should reject with a message`);
    return error;
  }
  assert.fail(`${what} should reject`);
}

export const limitChecks: readonly Check[] = [
  {
    name: `retention: purgeExpired deletes ended conversations past the retention (${RETENTION_MS} ms here) and nothing else`,
    storeOptions: { retentionMs: RETENTION_MS },
    async run(context) {
      const { store } = context;
      const orchestrator = context.orchestrator('retention');
      const owner = context.owner('a');
      const end = async (label: string) => {
        const id = context.id(label);
        const lease = await created(context, checkpoint(id, orchestrator, 1), owner);
        await committed(
          context,
          checkpoint(id, orchestrator, 2, { status: 'ended', result: '{}' }),
          lease,
        );
        return id;
      };
      const old = await end('old-ended');
      const running = context.id('old-running');
      await created(context, checkpoint(running, orchestrator, 1), owner, 1);
      const suspended = context.id('old-suspended');
      await created(
        context,
        checkpoint(suspended, orchestrator, 1, { status: 'suspended', suspendedAt: 1 }),
        owner,
      );
      await sleep(RETENTION_MS + 300);
      const young = await end('young-ended');
      const presentBefore = (await store.get(old)) !== undefined;
      const purged = await store.purgeExpired();
      // Nothing purged and the old one still there: the store keeps another retention (the kit
      // lets a factory ignore what it cannot honour), which is said as such, not as a miscount.
      if (presentBefore && purged === 0 && (await store.get(old)) !== undefined) {
        assert.fail(
          `the store factory did not apply retentionMs (${RETENTION_MS} ms): an ended conversation past it was not purged (purgeExpired said 0). A factory that cannot honour it may skip this check: verifyConversationStore(factory, { skip: [name of this check] })`,
        );
      }
      if (presentBefore)
        assert.ok(purged >= 1, `purgeExpired should count what it deleted, said ${purged}`);
      assert.equal(
        await store.get(old),
        undefined,
        'the ended conversation past retention is gone',
      );
      const kept = await Promise.all([young, running, suspended].map((id) => store.get(id)));
      assert.deepEqual(
        kept.map((c) => c?.status),
        ['ended', 'running', 'suspended'],
        'a young ended conversation, and running and suspended ones of any age, are kept',
      );
      assert.equal(await store.purgeExpired(), 0, 'a second purge finds nothing');
    },
  },
  {
    name: `scale: 1,000 conversations at once, each created and committed ${COMMITS_EACH} times: every commit applies`,
    async run(context) {
      const { store } = context;
      const count = CONVERSATIONS;
      const orchestrator = context.orchestrator('scale');
      const ids = Array.from({ length: count }, (_, i) =>
        context.id(`scale-${String(i).padStart(5, '0')}`),
      );
      const owner = context.owner('a');
      await Promise.all(
        ids.map(async (id) => {
          let lease: Lease = await created(context, checkpoint(id, orchestrator, 1), owner);
          for (let seq = 2; seq <= COMMITS_EACH + 1; seq++) {
            const last = seq === COMMITS_EACH + 1;
            const cp = checkpoint(id, orchestrator, seq, {
              state: JSON.stringify({ id, seq }),
              ...(last ? { status: 'suspended' as const, suspendedAt: seq } : {}),
            });
            const outcome = await store.commit(cp, lease, LONG_LEASE_MS);
            assert.ok(outcome.ok, `commit ${seq} of ${id} should apply`);
            lease = outcome.lease;
          }
        }),
      );
      const stats = (await store.stats()).find((s) => s.orchestrator === orchestrator);
      assert.deepEqual(
        [stats?.running, stats?.suspended],
        [0, count],
        'every conversation is suspended after its last commit',
      );
      const listed: string[] = [];
      for (let after: string | undefined; ; ) {
        const page = await store.list({ orchestrator, limit: 1_000, ...(after ? { after } : {}) });
        listed.push(...page.map((c) => c.conversationId));
        if (page.length < 1_000) break;
        after = page[page.length - 1]?.conversationId;
      }
      assert.deepEqual(listed, ids, 'list pages through them all in id order');
      const sample = ids.filter((_, i) => i % 97 === 0);
      for (const id of sample) {
        const outcome = await store.acquire(id, context.owner('reader'), LONG_LEASE_MS);
        const cp = (outcome as { checkpoint: Checkpoint }).checkpoint;
        assert.deepEqual(
          [cp.seq, JSON.parse(cp.state)],
          [COMMITS_EACH + 1, { id, seq: COMMITS_EACH + 1 }],
        );
      }
    },
  },
  {
    name: 'size: a checkpoint of exactly maxCheckpointBytes (UTF-8; maxSnapshotBytes on an incremental store) is accepted whole; one byte more is rejected with an error and changes nothing',
    storeOptions: { maxSnapshotBytes: SNAPSHOT_LIMIT },
    async run(context) {
      const { store } = context;
      const limit = wholeCheckpointLimit(store);
      assert.ok(
        Number.isSafeInteger(limit) && limit >= 1_024,
        `the whole checkpoint's limit should be an integer of at least 1,024, is ${limit}`,
      );
      snapshotLimitApplied(store, limit);
      let { id, orchestrator, lease } = await begun(context, 'size');
      const atLimit = checkpoint(id, orchestrator, 2, { state: jsonOfBytes(limit) });
      lease = await committed(context, atLimit, lease);
      const past = checkpoint(id, orchestrator, 3, { state: jsonOfBytes(limit + 1) });
      const error = await rejection('a commit one byte past the limit', () =>
        store.commit(past, lease, LONG_LEASE_MS),
      );
      assert.ok(
        error.message.includes(id) || error.message.includes(String(limit)),
        `the error should name the conversation or the limit: ${error.message}`,
      );
      // With a result: state + result together count.
      const half = Math.floor(limit / 2);
      await rejection('an ended commit whose state and result together pass the limit', () =>
        store.commit(
          checkpoint(id, orchestrator, 3, {
            status: 'ended',
            state: jsonOfBytes(half),
            result: jsonOfBytes(limit - half + 1),
          }),
          lease,
          LONG_LEASE_MS,
        ),
      );
      const tooBig = context.id('size-create');
      await rejection('a create past the limit', () =>
        store.create(
          checkpoint(tooBig, orchestrator, 1, { state: jsonOfBytes(limit + 1) }),
          context.owner('a'),
          LONG_LEASE_MS,
        ),
      );
      assert.equal(await store.get(tooBig), undefined, 'the refused create left nothing');
      assert.equal((await store.get(id))?.seq, 2, 'the refused commits left the stored seq');
      await store.release(id, lease);
      const back = await store.acquire(id, context.owner('b'), LONG_LEASE_MS);
      assert.equal(
        (back as { checkpoint: Checkpoint }).checkpoint.state === atLimit.state,
        true,
        'the checkpoint at the limit comes back whole',
      );
    },
  },
  {
    name: 'close: idempotent; a commit in flight settles; every call after close rejects with an error (append and snapshot too)',
    async run(context) {
      const store: ConversationStore = await context.makeStore({});
      const id = context.id('closed');
      const orchestrator = context.orchestrator('closed');
      const lease = await created(
        { ...context, store },
        checkpoint(id, orchestrator, 1),
        context.owner('a'),
      );
      const inFlight = store.commit(checkpoint(id, orchestrator, 2), lease, LONG_LEASE_MS).then(
        () => 'settled',
        () => 'settled',
      );
      await store.close();
      assert.equal(await inFlight, 'settled');
      await store.close();
      const calls: [string, () => Promise<unknown>][] = [
        ['create', () => store.create(checkpoint(context.id('x'), orchestrator, 1), 'o', 1)],
        ['acquire', () => store.acquire(id, context.owner('b'), LONG_LEASE_MS)],
        ['commit', () => store.commit(checkpoint(id, orchestrator, 3), lease, LONG_LEASE_MS)],
        ['renew', () => store.renew(id, lease, LONG_LEASE_MS)],
        ['release', () => store.release(id, lease)],
        ['get', () => store.get(id)],
        ['delete', () => store.delete(id)],
        ['list', () => store.list({ limit: 1 })],
        ['stats', () => store.stats()],
        ['purgeExpired', () => store.purgeExpired()],
      ];
      const log = incremental(store);
      if (log !== undefined) {
        const entry = { conversationId: id, seq: 3, dispatchCount: 2, entry: '{}' };
        calls.push(
          ['append', () => log.append(entry, lease, LONG_LEASE_MS)],
          ['snapshot', () => log.snapshot(checkpoint(id, orchestrator, 2), lease)],
        );
      }
      for (const [method, call] of calls) {
        await rejection(`${method}() after close()`, async () => call());
      }
    },
  },
];
