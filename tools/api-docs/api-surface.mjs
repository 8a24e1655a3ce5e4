// @ts-check
/**
 * The public API surface as text, from TypeDoc's JSON (`typedoc --json FILE`): every exported
 * name of every entry point with its kind, type and signatures, and no source positions or ids,
 * so that moving code between files leaves it unchanged. `node tools/api-docs/api-surface.mjs
 * api.json` prints it; the redesign (issue 40) compared it before and after.
 */
import { readFileSync } from 'node:fs';

const DROP = new Set([
  'id',
  'sources',
  'target',
  'variant',
  'groups',
  'categories',
  'symbolIdMap',
  'files',
  'packageVersion',
  'schemaVersion',
  'readme',
  'flags',
]);

/** @param {unknown} node @returns {unknown} */
function strip(node) {
  if (Array.isArray(node)) return node.map(strip);
  if (node === null || typeof node !== 'object') return node;
  /** @type {Record<string, unknown>} */
  const out = {};
  for (const [key, value] of Object.entries(node)) {
    if (DROP.has(key)) continue;
    if (key === 'flags' || key === 'comment') continue;
    out[key] = strip(value);
  }
  if (Array.isArray(out.children)) {
    out.children = /** @type {{name: string}[]} */ (out.children)
      .slice()
      .sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  }
  // A union's members come in the checker's order, which follows the order files are read in.
  if (out.type === 'union' && Array.isArray(out.types)) {
    out.types = out.types
      .map((t) => [JSON.stringify(t), t])
      .sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0))
      .map(([, t]) => t);
  }
  return out;
}

const file = process.argv[2];
if (!file) throw new Error('usage: node tools/api-docs/api-surface.mjs TYPEDOC_JSON');
const json = JSON.parse(readFileSync(file, 'utf8'));
process.stdout.write(`${JSON.stringify(strip(json), null, 1)}\n`);
