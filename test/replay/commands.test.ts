/**
 * The replay commands the docs show run as shown: the record-replay example's README from a
 * clone (its sh block, line by line), and the bin after `npm run build` (executable, its worker
 * built beside it).
 */
import { execFile } from 'node:child_process';
import { readFileSync, statSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { readmeCodeBlocks } from '../helpers/readme.ts';

const ROOT = resolve(import.meta.dirname, '../..');
const sh = (command: string) =>
  promisify(execFile)('sh', ['-c', command], { cwd: ROOT, maxBuffer: 16 * 1024 * 1024 });

describe('examples/record-replay/README.md', () => {
  it('runs its commands as shown, from a clone: the recording is kept and the command replays it against candidates.ts', async () => {
    const readme = readFileSync(join(ROOT, 'examples/record-replay/README.md'), 'utf8');
    const commands = readmeCodeBlocks(readme)
      .filter((b) => b.lang === 'sh')
      .flatMap((b) => b.code.trim().split('\n'));
    expect(commands).toEqual([
      'npx tsx examples/record-replay/main.ts',
      'npx tsx examples/record-replay/main.ts --keep .tmp/desks.ndjson',
      'npm run replay -- .tmp/desks.ndjson --policy ./examples/record-replay/candidates.ts#looser --html .tmp/report.html',
    ]);
    const outputs: string[] = [];
    for (const command of commands) outputs.push((await sh(command)).stdout);
    expect(outputs[1]).toContain('looser: 20 earlier, 10 same, 0 later');
    expect(outputs[2]).toMatch(
      /replayed 30 conversations against any_of\(converged,max_dispatches\)/,
    );
    expect(outputs[2]).toMatch(/\nearlier {2,}20 {2,}66\.7%\n/);
    expect(readFileSync(join(ROOT, '.tmp/report.html'), 'utf8')).toContain('<svg id="chart"');
  }, 120_000);
});

describe('npm run build', () => {
  it('leaves the bin executable, and the built command runs its worker', async () => {
    await sh('npm run -s build');
    const bin = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')).bin[
      'conversation-orchestrator'
    ] as string;
    expect(statSync(join(ROOT, bin)).mode & 0o111).toBe(0o111);
    writeFileSync(
      join(ROOT, '.tmp/sooner.mjs'),
      "export default { name: 'sooner', start: () => (s) => ({ terminate: s.dispatchCount >= 2, reason: 'sooner' }) };\n",
    );
    // Run as a program (its execute bit and shebang), from the recording the README's commands kept.
    const { stdout } = await sh(`${bin} replay .tmp/desks.ndjson --policy ./.tmp/sooner.mjs`);
    expect(stdout).toMatch(/^replayed 30 conversations against sooner\n/);
  }, 180_000);
});
