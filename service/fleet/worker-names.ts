/** The queue and orchestrators fleet mode's producer and workers share. */

/** The BullMQ queue of the demo (KEDA scales the workers on `bull:demo-conversations:wait`). */
export const DEMO_QUEUE = 'demo-conversations';
/** The orchestrators of the demo, as in single-process mode. */
export const DEMO_ORCHESTRATORS = ['fx_desks', 'rates_desks'] as const;

/**
 * How long a worker's drain may take on SIGTERM (`close({ timeoutMs })`; it returns within this
 * plus about 1 s): the Kubernetes grace period (ops/fleet-kubernetes.ts) is above it.
 */
export const WORKER_DRAIN_MS = 10_000;
