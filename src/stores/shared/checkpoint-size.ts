/** The size of a checkpoint, as every store's `maxCheckpointBytes` counts it. */
import type { Checkpoint } from '../../core/spi/store.ts';

/** UTF-8 bytes of the checkpoint's `state` and `result` together. */
export function checkpointBytes(checkpoint: Checkpoint): number {
  return (
    Buffer.byteLength(checkpoint.state, 'utf8') +
    (checkpoint.result === undefined ? 0 : Buffer.byteLength(checkpoint.result, 'utf8'))
  );
}

/**
 * The checkpoint's size when it is past `max` bytes, `undefined` when it fits. A UTF-16 code unit
 * is at most 3 UTF-8 bytes, so most checkpoints are passed without counting their bytes.
 */
export function oversizeBytes(checkpoint: Checkpoint, max: number): number | undefined {
  const units = checkpoint.state.length + (checkpoint.result?.length ?? 0);
  if (units * 3 <= max) return undefined;
  const bytes = checkpointBytes(checkpoint);
  return bytes > max ? bytes : undefined;
}

/** Why the network stores refuse a checkpoint of `bytes` (the end of their error message). */
export function oversizeReason(bytes: number, max: number): string {
  return `its checkpoint is ${bytes.toLocaleString('en')} bytes (state + result, UTF-8), past maxCheckpointBytes ${max.toLocaleString('en')}`;
}
