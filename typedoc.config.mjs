// @ts-check
/**
 * The API reference (`npm run docs`, written to docs/api/, not committed). Its entry points are
 * the package's: every `exports` entry that points into dist/ is documented from its source, so a
 * new entry point is picked up, named by its import path (tools/api-docs/typedoc-entry-names.mjs). The landing
 * page is docs/api-overview.md. Any warning (an undocumented export, a broken link, a referenced
 * type that is not exported) fails the build.
 */
import { readFileSync } from 'node:fs';

const pkg = JSON.parse(readFileSync(new URL('./package.json', import.meta.url), 'utf8'));
const entryPoints = Object.values(pkg.exports)
  .map((target) => (typeof target === 'string' ? target : target.import))
  .filter((target) => typeof target === 'string' && target.startsWith('./dist/'))
  .map((target) => target.replace(/^\.\/dist\//, './src/').replace(/\.js$/, '.ts'));

/** @type {Partial<import('typedoc').TypeDocOptions>} */
export default {
  name: pkg.name,
  entryPoints,
  tsconfig: './tsconfig.build.json',
  out: './docs/api',
  // The landing page: what each entry point is, by import path, with links to the guides.
  readme: './docs/api-overview.md',
  // Names each entry point by its import path (from `exports`) and groups errors apart.
  plugin: ['./tools/api-docs/typedoc-entry-names.mjs'],
  excludePrivate: true,
  excludeInternal: true,
  treatWarningsAsErrors: true,
  validation: {
    notExported: true,
    invalidLink: true,
    invalidPath: true,
    notDocumented: true,
    rewrittenLink: true,
    unusedMergeModuleWith: true,
  },
  githubPages: false,
  // Source links need a hosted git remote; a clone of a local path has none and TypeDoc's warning
  // about it would fail the build (treatWarningsAsErrors). The reference links no sources.
  disableSources: true,
  hideGenerator: true,
  // Members grouped by kind (Classes, Errors, Functions, Interfaces, Type Aliases, Variables),
  // alphabetical within a group.
  groupOrder: ['Classes', 'Errors', 'Functions', 'Interfaces', 'Type Aliases', 'Variables', '*'],
  sort: ['alphabetical'],
};
