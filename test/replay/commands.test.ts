/**
 * The bin after `npm run build`: executable, its worker built beside it. (The replay commands the
 * docs show, from a clone and installed, are run by test/docs/replay-commands.test.ts.)
 */
import { execFile } from 'node:child_process';
import { readFileSync, statSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { withDistLock } from '../helpers/dist-lock.ts';

const ROOT = resolve(import.meta.dirname, '../..');
const sh = (command: string) =>
  promisify(execFile)('sh', ['-c', command], { cwd: ROOT, maxBuffer: 16 * 1024 * 1024 });

describe('npm run build', () => {
  it(
    'leaves the bin executable, and the built command runs its worker',
    () =>
      withDistLock(async () => {
        await sh('npm run -s build');
        const bin = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')).bin[
          'conversation-orchestrator'
        ] as string;
        expect(statSync(join(ROOT, bin)).mode & 0o111).toBe(0o111);
        writeFileSync(
          join(ROOT, '.tmp/sooner.mjs'),
          "export default { name: 'sooner', start: () => (s) => ({ terminate: s.dispatchCount >= 2, reason: 'sooner' }) };\n",
        );
        // A recording of this test's own (the docs' commands keep theirs in .tmp/desks.ndjson).
        await sh('npx tsx examples/record-replay/main.ts --keep .tmp/build-desks.ndjson');
        // Run as a program (its execute bit and shebang).
        const { stdout } = await sh(
          `${bin} replay .tmp/build-desks.ndjson --policy ./.tmp/sooner.mjs`,
        );
        expect(stdout).toMatch(/^replayed 30 conversations against sooner\n/);
      }),
    180_000,
  );
});
