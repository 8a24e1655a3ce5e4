/**
 * Writes src/observability/version.ts from package.json, as OpenTelemetry's contrib packages do:
 * the tracer carries the package's name and version without a second hand-kept copy. Run by
 * `npm version` (the `version` lifecycle script); a test fails when the file is stale.
 */
import { readFileSync, writeFileSync } from 'node:fs';

const root = new URL('../', import.meta.url);
const { name, version } = JSON.parse(readFileSync(new URL('package.json', root), 'utf8')) as {
  name: string;
  version: string;
};
writeFileSync(
  new URL('src/observability/version.ts', root),
  `// Generated from package.json by scripts/write-version.ts (run by \`npm version\`). Do not edit.
export const PACKAGE_NAME = ${JSON.stringify(name).replaceAll('"', "'")};
export const PACKAGE_VERSION = ${JSON.stringify(version).replaceAll('"', "'")};
`,
);
