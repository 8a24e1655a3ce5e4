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
  type Candidate,
  type CandidateEnding,
  type CandidatesByOrchestrator,
  type ChartPoint,
  type Comparison,
  type ConversationList,
  type ListedConversation,
  type ReplayedConversation,
  type ReplayedState,
  type ReplayedUsage,
  type ReplayOptions,
  type ReplayReport,
  replay,
  replayConversation,
  type Saving,
} from './replay.ts';
export { formatReport, renderHtml as renderReportHtml } from './report.ts';
export {
  createRotatingFileSink,
  type RotatingFileSink,
  type RotatingFileSinkOptions,
} from './rotating-file.ts';
export type { DroppedCounts, RecorderLogger, RecordingSink } from './sink.ts';
