/**
 * The SQLite store's errors: SQLite's failures wrapped in a `StoreError` naming the store, the
 * file, what failed and what SQLite's code means, and the lock held by another connection.
 */
import {
  isNewerSchemaError,
  isStoreError,
  STORE_CODES,
  StoreError,
} from '../shared/store-error.ts';

/** What a SQLite error code means for the person reading the message. */
const HINTS: Record<string, string> = {
  SQLITE_FULL: 'the disk is full',
  SQLITE_READONLY: 'the file or its directory is read-only',
  SQLITE_READONLY_DBMOVED: 'the file was moved or deleted while open',
  SQLITE_BUSY: 'another process held the write lock longer than busyTimeoutMs',
  SQLITE_IOERR: 'an I/O error',
  SQLITE_CORRUPT: 'the file is corrupt',
  SQLITE_NOTADB: 'the file is not a SQLite database',
  SQLITE_CANTOPEN:
    'the file or its WAL cannot be opened for writing (a missing directory, or a read-only file or file system?)',
};

function hint(code: string | undefined): string {
  if (code === undefined) return '';
  const known = HINTS[code] ?? HINTS[code.replace(/_[A-Z]+$/, '')];
  return known === undefined ? ` [${code}]` : ` [${code}: ${known}]`;
}

/**
 * An error naming the store, the file and what failed, with SQLite's error as its `cause`; the
 * store's own errors (their code tells) pass as they are.
 */
export function storeError(
  what: string,
  path: string,
  error: unknown,
  code: string = STORE_CODES.failed,
): Error {
  if (isStoreError(error) || isNewerSchemaError(error)) return error as Error;
  const sqliteCode = (error as { code?: unknown }).code;
  const message = error instanceof Error ? error.message : String(error);
  return new StoreError(
    `sqlite store: ${what} failed on ${path}: ${message}${hint(typeof sqliteCode === 'string' ? sqliteCode : undefined)}`,
    code,
    error,
  );
}

/** Whether SQLite said another connection holds the lock (`SQLITE_BUSY` and its variants). */
export function isBusy(error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === 'string' && code.startsWith('SQLITE_BUSY');
}
