/**
 * The error of a store call, recognized by its `code` (never by its message, which names the
 * store, the database and what failed, and may change).
 */
import { OrchestratorError } from '../../core/spi/errors.ts';

/** The codes of {@link StoreError}: every one starts with `ERR_STORE`. */
export const STORE_CODES = {
  /** A call failed or did not answer in time; `cause` is the database client's error. */
  failed: 'ERR_STORE',
  /** A call after `close()`. */
  closed: 'ERR_STORE_CLOSED',
  /** A checkpoint past the store's `maxCheckpointBytes`. */
  tooLarge: 'ERR_STORE_CHECKPOINT_TOO_LARGE',
  /** The optional peer dependency (the database client) is not installed. */
  peerMissing: 'ERR_STORE_PEER_MISSING',
} as const;

/** The code of a database written by a newer version of this package (every store's). */
export const NEWER_SCHEMA_CODE = 'ERR_NEWER_SCHEMA';

/** A store's failure: the message says which store, which database and what failed. */
export class StoreError extends OrchestratorError {
  override name = 'StoreError';
  override readonly code: string;
  constructor(message: string, code: string = STORE_CODES.failed, cause?: unknown) {
    super(message, cause === undefined ? undefined : { cause });
    this.code = code;
  }
}

/** The `code` of one of the library's errors, if `error` is one. */
export function libraryErrorCode(error: unknown): string | undefined {
  if (!(error instanceof OrchestratorError)) return undefined;
  const { code } = error as { code?: unknown };
  return typeof code === 'string' ? code : undefined;
}

/** Whether `error` says the database was written by a newer version of this package. */
export function isNewerSchemaError(error: unknown): boolean {
  return libraryErrorCode(error) === NEWER_SCHEMA_CODE;
}

/** Whether `error` is already a store's error (so wrapping it again would say it twice). */
export function isStoreError(error: unknown): error is StoreError {
  return libraryErrorCode(error)?.startsWith(STORE_CODES.failed) === true;
}
