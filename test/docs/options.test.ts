/**
 * Every option of the public options interfaces is in its page's options table, and the table
 * lists no option the interface lacks: the interfaces are read with the TypeScript compiler, so a
 * new option without a row (or a row for a removed one) fails here.
 */
import { join, resolve } from 'node:path';
// TypeScript 7 (the repository's compiler) has no JavaScript API yet; TypeScript 6's is published
// for tools as @typescript/typescript6.
import ts from '@typescript/typescript6';
import { describe, expect, it } from 'vitest';
import { docsTableCellNames } from '../helpers/readme.ts';

const ROOT = resolve(import.meta.dirname, '../..');

/** The property names of `interfaceName` in `file`, its own and those of what it extends. */
function optionNames(file: string, interfaceName: string): string[] {
  const program = ts.createProgram([join(ROOT, file)], {
    strict: true,
    allowImportingTsExtensions: true,
    noEmit: true,
    module: ts.ModuleKind.NodeNext,
    moduleResolution: ts.ModuleResolutionKind.NodeNext,
  });
  const checker = program.getTypeChecker();
  const source = program.getSourceFile(join(ROOT, file));
  let names: string[] | undefined;
  source?.forEachChild((node) => {
    if (ts.isInterfaceDeclaration(node) && node.name.text === interfaceName) {
      names = checker
        .getTypeAtLocation(node)
        .getProperties()
        .map((p) => p.name);
    }
  });
  if (names === undefined) throw new Error(`${file} declares no interface ${interfaceName}`);
  return names.sort();
}

const TABLES = [
  {
    options: ['src/core/orchestrator.ts', 'OrchestratorOptions'],
    table: ['docs/loop.md', '## Options of `new ConversationOrchestrator(options)`'],
  },
  {
    options: ['src/observability/types.ts', 'TelemetryOptions'],
    table: ['docs/telemetry.md', '## Options of `createConversationTelemetry(options)`'],
  },
  {
    options: ['src/replay/recorder.ts', 'ConversationRecorderOptions'],
    table: ['docs/replay.md', '### Options of `createConversationRecorder(options)`'],
  },
  {
    options: ['src/stores/sqlite/options.ts', 'SqliteStoreOptions'],
    table: ['docs/stores.md', '### Options of `createSqliteStore(options)`'],
  },
] as const;

describe('options tables', () => {
  for (const { options, table } of TABLES) {
    it(`${table[0]} lists exactly the options of ${options[1]}`, () => {
      const documented = [...new Set(docsTableCellNames(table[1], table[0]))].sort();
      expect(documented).toEqual(optionNames(options[0], options[1]));
    });
  }

  it('reads an interface as the compiler sees it, inherited options included', () => {
    // ReplayOptions extends ReadOptions: skipBad, onBadLine and maxLineBytes come from the parent.
    expect(optionNames('src/replay/replay.ts', 'ReplayOptions')).toEqual([
      'chartSize',
      'maxLineBytes',
      'maxListed',
      'onBadLine',
      'onConversation',
      'skipBad',
    ]);
  });
});
