/** The queue and orchestrators fleet mode's producer and workers share. */

/** The BullMQ queue of the demo (KEDA scales the workers on `bull:demo-conversations:wait`). */
export const DEMO_QUEUE = 'demo-conversations';
/** The orchestrators of the demo, as in single-process mode. */
export const DEMO_ORCHESTRATORS = ['fx_desks', 'rates_desks'] as const;
