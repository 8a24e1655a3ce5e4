export type { Candidate, CandidatesByOrchestrator } from './candidate.ts';
export {
  RECORDING_FORMAT_VERSION,
  type RecordedConversation,
  type RecordedDispatch,
  type RecordedEnding,
  type RecordedUsage,
} from './format.ts';
export {
  type ReadOptions,
  RecordingFormatError,
  type RecordingSource,
  type RecordingStream,
  readRecordingFiles,
  readRecordings,
} from './read.ts';
export {
  type ConversationRecorder,
  type ConversationRecorderOptions,
  createConversationRecorder,
  type RecorderStats,
} from './recorder.ts';
export {
  type ChartPoint,
  type ConversationList,
  type ListedConversation,
  type ReplayOptions,
  type ReplayReport,
  replay,
  type Saving,
} from './replay.ts';
export {
  type CandidateEnding,
  type Comparison,
  type ReplayedConversation,
  type ReplayedState,
  type ReplayedUsage,
  replayConversation,
} from './replay-conversation.ts';
export { formatReport, renderHtml as renderReportHtml } from './report.ts';
export {
  createRotatingFileSink,
  type RotatingFileSink,
  type RotatingFileSinkOptions,
} from './rotating-file.ts';
export type { DroppedCounts, RecorderLogger, RecordingSink } from './sink.ts';
