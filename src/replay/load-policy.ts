/**
 * Loading the candidate policy for the CLI: `./candidate.ts#looser` names a module and an export.
 * JavaScript (`.js`, `.mjs`, `.cjs`) loads as it is. TypeScript loads where Node strips types
 * itself (`process.features.typescript`: Node >= 22.18 or 23.6), else through `tsx` found from
 * the working directory (the user's project), else the error says what to install.
 */

import { existsSync, readFileSync, statSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, extname, join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { OrchestratorError } from '../core/spi/errors.ts';
import { type Candidate, isCandidatesByOrchestrator, isTerminationPolicy } from './candidate.ts';
import { describeThrown } from './serialize.ts';

/** A mistake in what the command was given: printed as it is, exit code 2. */
export class UsageError extends OrchestratorError {
  override name = 'UsageError';
  override readonly code: string = 'ERR_REPLAY_USAGE';
}

const TYPESCRIPT = new Set(['.ts', '.mts', '.cts']);

/** `path#export` → its parts; the export defaults to `default`, or the module's only policy. */
export function parsePolicySpec(spec: string): { path: string; exportName: string | undefined } {
  const hash = spec.lastIndexOf('#');
  if (hash <= 0) return { path: spec, exportName: undefined };
  const exportName = spec.slice(hash + 1);
  return { path: spec.slice(0, hash), exportName: exportName === '' ? undefined : exportName };
}

async function importTypeScript(file: string, cwd: string): Promise<Record<string, unknown>> {
  const features = process.features as { typescript?: unknown };
  if (features.typescript)
    return (await import(pathToFileURL(file).href)) as Record<string, unknown>;
  let api: string;
  try {
    api = tsxEsmApi(createRequire(join(cwd, 'package.json')).resolve('tsx/package.json'));
  } catch {
    throw new UsageError(
      `${file} is TypeScript, and this Node (${process.version}) does not strip types: install tsx in your project (npm install --save-dev tsx), run on Node >= 22.18, or give a .js/.mjs policy`,
    );
  }
  const loaded = (await import(pathToFileURL(api).href)) as { tsImport?: unknown };
  const tsImport = loaded.tsImport as
    | ((specifier: string, parent: string) => Promise<Record<string, unknown>>)
    | undefined;
  if (typeof tsImport !== 'function') {
    throw new UsageError(`the tsx found at ${api} has no tsImport(): tsx >= 4.8 is needed`);
  }
  return tsImport(pathToFileURL(file).href, import.meta.url);
}

/** The ESM build of tsx's `tsx/esm/api`, from its package.json's exports (the CommonJS one cannot load ESM). */
function tsxEsmApi(packageJson: string): string {
  const exports = (
    JSON.parse(readFileSync(packageJson, 'utf8')) as { exports?: Record<string, unknown> }
  ).exports?.['./esm/api'] as { import?: string | { default?: string } } | undefined;
  const target = typeof exports?.import === 'string' ? exports.import : exports?.import?.default;
  if (typeof target !== 'string') throw new Error('tsx has no ./esm/api export');
  return join(dirname(packageJson), target);
}

/** Loads `spec` (relative to `cwd`) and returns the termination policy it exports. */
export async function loadPolicy(
  spec: string,
  cwd: string,
): Promise<{
  readonly policy: Candidate;
  readonly exportName: string;
}> {
  const { path, exportName } = parsePolicySpec(spec);
  const file = resolve(cwd, path);
  if (!existsSync(file) || !statSync(file).isFile()) {
    throw new UsageError(`--policy ${spec}: no such file ${file}`);
  }
  let module: Record<string, unknown>;
  try {
    module = TYPESCRIPT.has(extname(file))
      ? await importTypeScript(file, cwd)
      : ((await import(pathToFileURL(file).href)) as Record<string, unknown>);
  } catch (error) {
    if (error instanceof UsageError) throw error;
    throw new UsageError(`--policy ${spec}: loading ${file} failed: ${describeThrown(error)}`);
  }
  const names = Object.keys(module).filter((k) => k !== '__esModule');
  let name = exportName;
  if (name === undefined) {
    if ('default' in module && module.default !== undefined) name = 'default';
    else {
      const policies = names.filter((k) => isCandidate(module[k]));
      if (policies.length !== 1) {
        throw new UsageError(
          `--policy ${spec}: name the export (${path}#name): ${file} has no default export and ${policies.length === 0 ? 'no' : policies.length} exported termination policies${policies.length > 1 ? ` (${policies.join(', ')})` : ''}`,
        );
      }
      name = policies[0] as string;
    }
  }
  if (!(name in module)) {
    throw new UsageError(
      `--policy ${spec}: ${file} has no export \`${name}\` (its exports: ${names.length === 0 ? 'none' : names.join(', ')})`,
    );
  }
  let value = module[name];
  // A CommonJS module's exports object arrives as `default`.
  if (
    name === 'default' &&
    !isCandidate(value) &&
    isCandidate((value as { default?: unknown })?.default)
  ) {
    value = (value as { default: unknown }).default;
  }
  if (!isCandidate(value)) {
    const hint =
      typeof value === 'function'
        ? ' (a function: export the policy it makes, e.g. `export default converged({ … })`, not the factory)'
        : '';
    throw new UsageError(
      `--policy ${spec}: export \`${name}\` of ${file} is not a termination policy ({ name: string, start() }) or an object of them by orchestrator name, got ${describeValueShort(value)}${hint}`,
    );
  }
  return { policy: value as Candidate, exportName: name };
}

/** A termination policy, or an object of them by orchestrator name. */
function isCandidate(value: unknown): value is Candidate {
  return isTerminationPolicy(value) || isCandidatesByOrchestrator(value);
}

function describeValueShort(value: unknown): string {
  if (value === null) return 'null';
  if (typeof value === 'function') return 'a function';
  if (typeof value === 'object') return 'an object without name and start()';
  try {
    return `${JSON.stringify(value)?.slice(0, 60)} (${typeof value})`;
  } catch {
    return typeof value;
  }
}
