/**
 * A test file's own scratch folder: made fresh under the system's temp folder when the file is
 * loaded, removed with everything in it once the file's tests are done.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll } from 'vitest';

/** A new folder named `prefix` and a random tail, removed after all the calling file's tests. */
export function tempDirForFile(prefix: string): string {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}
