/** The conformance kit against the SQLite store: a file on disk (WAL, synchronous FULL) and :memory:. */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll } from 'vitest';
import { createSqliteStore } from '../../src/stores/sqlite/index.ts';
import { describeConversationStore } from '../helpers/store-conformance.ts';

const dir = mkdtempSync(join(tmpdir(), 'store-conformance-sqlite-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
let files = 0;

describeConversationStore('the SQLite store on a file', (options) =>
  createSqliteStore({ path: join(dir, `full-${files++}.db`), ...options }),
);
describeConversationStore('the SQLite store in memory', (options) =>
  createSqliteStore({ path: ':memory:', ...options }),
);
