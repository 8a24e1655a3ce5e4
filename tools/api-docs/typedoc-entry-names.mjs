// @ts-check
/**
 * A TypeDoc plugin for the API reference (typedoc.config.mjs loads it):
 * - each entry point's module is named by its import path, from package.json `exports`
 *   (`conversation-orchestrator`, `conversation-orchestrator/replay`, …): an entry point added to
 *   `exports` gets its name with no change here;
 * - classes that are errors (they extend `Error`, directly or not) go in a group of their own,
 *   "Errors", beside Classes, Functions, Interfaces…
 */
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { Comment, CommentTag, Converter, ReflectionKind } from 'typedoc';

// The repository's root: this plugin lives in tools/api-docs/, beside the TypeDoc it runs in.
const root = new URL('../../', import.meta.url);
const pkg = JSON.parse(readFileSync(new URL('./package.json', root), 'utf8'));

/** Source file of each entry point (absolute) -> its import path. */
export const importPaths = new Map(
  Object.entries(pkg.exports).flatMap(([key, target]) => {
    const file = typeof target === 'string' ? target : target.import;
    if (typeof file !== 'string' || !file.startsWith('./dist/')) return [];
    const source = resolve(
      new URL('.', root).pathname,
      file.replace(/^\.\/dist\//, './src/').replace(/\.js$/, '.ts'),
    );
    return [[source, key === '.' ? pkg.name : `${pkg.name}/${key.replace(/^\.\//, '')}`]];
  }),
);

/** Whether a class's symbol extends Error somewhere up its chain. */
function extendsError(checker, symbol) {
  const declaration = symbol?.declarations?.[0];
  if (declaration === undefined) return false;
  let type = checker.getDeclaredTypeOfSymbol(symbol);
  for (let depth = 0; depth < 20 && type !== undefined; depth++) {
    if (type.symbol?.name === 'Error') return true;
    const bases = type.getBaseTypes?.() ?? [];
    type = bases[0];
  }
  return false;
}

/** @param {import('typedoc').Application} app */
export function load(app) {
  app.converter.on(Converter.EVENT_CREATE_DECLARATION, (context, reflection) => {
    if (reflection.kindOf(ReflectionKind.Module)) {
      const symbol = context.getSymbolFromReflection(reflection);
      const file = symbol?.declarations?.[0]?.getSourceFile().fileName;
      const name = file === undefined ? undefined : importPaths.get(resolve(file));
      if (name !== undefined) reflection.name = name;
      return;
    }
    if (reflection.kindOf(ReflectionKind.Class)) {
      const symbol = context.getSymbolFromReflection(reflection);
      if (!extendsError(context.checker, symbol)) return;
      reflection.comment ??= new Comment();
      if (!reflection.comment.blockTags.some((tag) => tag.tag === '@group'))
        reflection.comment.blockTags.push(
          new CommentTag('@group', [{ kind: 'text', text: 'Errors' }]),
        );
    }
  });
}
