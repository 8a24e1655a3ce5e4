/**
 * A conversation whose lease is held by a process of this host that is gone (killed, crashed) is
 * taken at once by the next acquire, not at the lease's expiry. The network stores' acquire asks
 * twice for that: once, and again naming the dead holder, from which alone the store may take it.
 */
import { isLeaseOwnerAlive } from '../../core/durable/lease-owner.ts';

/**
 * `attempt(undefined)`'s answer, or, when `heldBy` finds it held by a holder that is not alive,
 * `attempt(holder)`'s (the lease taken from that holder, if it still holds it).
 */
export async function acquireFromDeadHolder<R>(
  attempt: (deadOwner: string | undefined) => Promise<R>,
  heldBy: (answer: R) => string | undefined,
): Promise<R> {
  const first = await attempt(undefined);
  const holder = heldBy(first);
  return holder !== undefined && !isLeaseOwnerAlive(holder) ? attempt(holder) : first;
}
