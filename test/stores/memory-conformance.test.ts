/** The conformance kit against the core's memory store. */
import { createMemoryStore } from '../../src/index.ts';
import { describeConversationStore } from '../helpers/store-conformance.ts';

describeConversationStore('the memory store', (options) => createMemoryStore(options));
