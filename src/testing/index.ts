/**
 * `conversation-orchestrator/testing`: the conformance kit for `ConversationStore`
 * implementations, independent of any test framework.
 */
export type { ConversationStoreFactory, StoreFactoryOptions } from './kit.ts';
export {
  type ConformanceCheck,
  type ConformanceReport,
  conformanceCheckNames,
  type VerifyConversationStoreOptions,
  verifyConversationStore,
} from './verify.ts';
