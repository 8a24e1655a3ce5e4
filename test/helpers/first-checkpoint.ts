/**
 * A conversation's first checkpoint as the durable tests store it by hand (a conversation of
 * another orchestrator, a crashed start, a state an older or a broken writer left): seq 1,
 * running, no dispatch yet.
 */
import type { Checkpoint, ConversationStore, Lease } from '../../src/index.ts';

/** The first checkpoint of `conversationId` by orchestrator `orchestrator`, holding `state`. */
export function firstCheckpoint(
  conversationId: string,
  orchestrator: string,
  state: string,
): Checkpoint {
  return { conversationId, orchestrator, status: 'running', seq: 1, dispatchCount: 0, state };
}

/** Creates that checkpoint on `store`, held by `owner` for `leaseMs`: its lease (throws if the id is taken). */
export async function createdFirst(
  store: ConversationStore,
  checkpoint: Checkpoint,
  owner: string,
  leaseMs: number,
): Promise<Lease> {
  const created = await store.create(checkpoint, owner, leaseMs);
  if (!created.created) throw new Error(`expected ${checkpoint.conversationId} to be created`);
  return created.lease;
}

/** Creates that checkpoint on `store` as `owner` would, then lets it go: anyone may acquire it. */
export async function createdAndReleased(
  store: ConversationStore,
  checkpoint: Checkpoint,
  owner: string,
  leaseMs: number,
): Promise<void> {
  await store.release(
    checkpoint.conversationId,
    await createdFirst(store, checkpoint, owner, leaseMs),
  );
}
