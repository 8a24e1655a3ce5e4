/**
 * The name rules, once: names that become metric label values, span names or Redis keys, and
 * conversation ids. The core's validation, the telemetry, the fleet, the ops bundle and the demo
 * service read them from here.
 */

/** Responder, model, orchestrator and sender names: 1-64 printable characters. */
export const NAME_PATTERN = /^[A-Za-z0-9_][A-Za-z0-9_.:-]{0,63}$/;

/** Conversation ids go onto every span and event: the name rule, up to 128 characters. */
export const CONVERSATION_ID_PATTERN = /^[A-Za-z0-9_][A-Za-z0-9_.:-]{0,127}$/;

/** BullMQ queue names: the name rule without `:` (BullMQ's key separator). */
export const QUEUE_NAME_PATTERN = /^[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}$/;
