/**
 * The optional peer dependencies (better-sqlite3, pg, ioredis): loaded when a store is created,
 * never when its entry point is imported, so an app installs only the client it uses.
 */
import { createRequire } from 'node:module';
import { STORE_CODES, StoreError } from './store-error.ts';

/** What to load and how to say it is missing. */
export interface Peer {
  /** The package name (`pg`). */
  readonly name: string;
  /** The versions the store supports (`^8.11.0`), shown in the error. */
  readonly range: string;
  /** Who needs it (`createPostgresStore({ connectionString })`), the error's first words. */
  readonly neededBy: string;
}

/**
 * The peer's module, or a StoreError (`ERR_STORE_PEER_MISSING`) that names it and the command
 * that installs it, with the resolution error as its `cause`.
 */
export function loadPeer<T>(peer: Peer): T {
  try {
    return createRequire(import.meta.url)(peer.name) as T;
  } catch (error) {
    throw new StoreError(
      `${peer.neededBy} needs the optional peer dependency ${peer.name} (${peer.range}): npm install ${peer.name}`,
      STORE_CODES.peerMissing,
      error,
    );
  }
}
