export {
  RECORDING_FORMAT_VERSION,
  type RecordedConversation,
  type RecordedDispatch,
  type RecordedEnding,
  type RecordedUsage,
} from './format.ts';
export {
  type ConversationRecorder,
  type ConversationRecorderOptions,
  createConversationRecorder,
  type RecorderStats,
} from './recorder.ts';
export type { DroppedCounts, RecorderLogger, RecordingSink } from './sink.ts';
