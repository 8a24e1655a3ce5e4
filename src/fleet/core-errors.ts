/**
 * The core's conversation errors the fleet throws. Until the durable core is merged this holds a
 * stand-in with the same name; afterwards it re-exports the core's classes.
 */
export class ConversationExistsError extends Error {
  override readonly name = 'ConversationExistsError';
}
