/**
 * `npm run ops`: writes the generated ops files for the default config into this repository.
 * `npm run ops -- --config my-ops.ts --out my-ops`: writes them for your config (a module whose
 * default export is what `defineOpsConfig` accepts) into another directory.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import { renderCollector } from './collector.ts';
import { defineOpsConfig, OpsConfigError, type OpsConfigInput } from './config.ts';
import { renderOps } from './render.ts';

const USAGE = 'Usage: npm run ops [-- --config my-ops.ts] [--out directory]';

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: { config: { type: 'string' }, out: { type: 'string' }, help: { type: 'boolean' } },
    strict: true,
  });
  if (values.help === true) {
    process.stdout.write(`${USAGE}\n`);
    return;
  }
  let input: OpsConfigInput = {};
  if (values.config !== undefined) {
    const module = (await import(pathToFileURL(resolve(values.config)).href)) as {
      default?: unknown;
    };
    if (typeof module.default !== 'object' || module.default === null) {
      throw new OpsConfigError(
        `Expected ${values.config} to export a config object as its default export, got \`${String(module.default)}\` (${typeof module.default})`,
      );
    }
    input = module.default as OpsConfigInput;
  }
  const config = defineOpsConfig(input);
  const out = resolve(values.out ?? fileURLToPath(new URL('..', import.meta.url)));
  for (const [path, content] of [...renderOps(config), ...renderCollector(config)]) {
    const file = resolve(out, path);
    mkdirSync(dirname(file), { recursive: true });
    writeFileSync(file, content);
    process.stdout.write(`wrote ${file}\n`);
  }
}

main().catch((error: unknown) => {
  process.stderr.write(`${error instanceof Error ? error.message : String(error)}\n${USAGE}\n`);
  process.exitCode = 2;
});
