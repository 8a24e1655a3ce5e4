/**
 * The SQLite store's file read without the store, as the crash and full-disk tests read it after
 * the fact: `integrity_check` must say ok, then every conversation's row (its id, seq and state).
 */
import Database from 'better-sqlite3';
import { expect } from 'vitest';

export interface StoredRow {
  readonly id: string;
  readonly seq: number;
  readonly state: string;
}

/** Opens the file at `path` (`readonly` if asked), expects it whole, and answers its rows by id. */
export function checkedRows(path: string, { readonly = false } = {}): StoredRow[] {
  const raw = new Database(path, { readonly });
  try {
    expect(raw.pragma('integrity_check', { simple: true })).toBe('ok');
    return raw.prepare('SELECT id, seq, state FROM conversations ORDER BY id').all() as StoredRow[];
  } finally {
    raw.close();
  }
}
