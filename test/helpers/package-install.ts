/**
 * The package installed as a user installs it, for the tests that pack it and install the
 * tarball into fresh apps: the repository's root, its TypeScript compiler, npm's flags, a fresh
 * app's folder, `npm pack` and npm run in a folder.
 */
import { execFile } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';

export const run = promisify(execFile);
export const ROOT = resolve(import.meta.dirname, '../..');
/** The repository's own TypeScript compiler. */
export const TSC = join(ROOT, 'node_modules/typescript/bin/tsc');

/** A user's install: from the npm cache where it can, no audit, no funding notice. */
export const USER_INSTALL_FLAGS: readonly string[] = [
  '--prefer-offline',
  '--no-audit',
  '--no-fund',
];
/** An install a test makes for its own ends: as a user's, no install scripts, only errors said. */
export const NPM_FLAGS: readonly string[] = [
  ...USER_INSTALL_FLAGS,
  '--ignore-scripts',
  '--loglevel=error',
];

/** npm run with `args` in `cwd` (output up to 16 MiB); its stdout and stderr. */
export function npm(
  cwd: string,
  args: readonly string[],
  env?: NodeJS.ProcessEnv,
): Promise<{ stdout: string; stderr: string }> {
  return run('npm', [...args], {
    cwd,
    maxBuffer: 16 * 1024 * 1024,
    ...(env === undefined ? {} : { env }),
  });
}

/** `npm pack` of the package in `cwd` (`flags` after), into `destination`: the tarball's path. */
export async function pack(
  cwd: string,
  destination: string,
  flags: readonly string[] = [],
): Promise<string> {
  const { stdout } = await npm(cwd, [
    'pack',
    '--json',
    ...flags,
    '--pack-destination',
    destination,
  ]);
  const [packed] = JSON.parse(stdout) as { filename: string }[];
  return join(destination, packed?.filename as string);
}

/**
 * A fresh app at `dir`: the folder, and a package.json naming it `name`, private, an ES module
 * unless `esm` is false.
 */
export function freshApp(dir: string, name: string, esm = true): string {
  mkdirSync(dir);
  writeFileSync(
    join(dir, 'package.json'),
    JSON.stringify({ name, private: true, ...(esm ? { type: 'module' } : {}) }),
  );
  return dir;
}
