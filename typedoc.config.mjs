// @ts-check
/**
 * The API reference (`npm run docs`, written to docs/api/, not committed). Its entry points are
 * the package's: every `exports` entry that points into dist/ is documented from its source, so a
 * new entry point is picked up. Any warning (an undocumented export, a broken link, a referenced
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
  readme: 'none',
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
  hideGenerator: true,
  sort: ['source-order'],
};
