/**
 * The reader's check of a line's shape is the JSON Schema itself: `schemas/recording.schema.json`
 * (shipped in the package) is read once and interpreted here, so the reader and the schema cannot
 * drift apart. Only the keywords the schema uses are understood; a schema using any other
 * keyword fails loudly at load instead of being half-checked. What JSON Schema cannot say (the
 * order of the dispatches, their count against the ending's) the reader checks after this, and
 * the schema's `$comment` lists it.
 */
import { readFileSync } from 'node:fs';

type Schema = Readonly<Record<string, unknown>>;

/** Keywords that only describe (annotations): no effect on what is valid. */
const ANNOTATIONS = new Set(['$schema', '$id', '$comment', 'title', 'description']);
/** Keywords this interpreter checks. */
const CHECKED = new Set([
  'type',
  'const',
  'required',
  'properties',
  'additionalProperties',
  'items',
  'minimum',
  '$ref',
  '$defs',
]);

function typeOf(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'array';
  return typeof value;
}

function show(value: unknown): string {
  if (typeof value === 'number' && !Number.isFinite(value)) return String(value);
  try {
    const json = JSON.stringify(value);
    if (json === undefined) return typeOf(value);
    return json.length > 60 ? `${json.slice(0, 60)}…` : json;
  } catch {
    return typeOf(value);
  }
}

/** Whether `value` is of the JSON Schema type `type`, as ajv checks it (finite numbers only). */
function isType(value: unknown, type: string): boolean {
  switch (type) {
    case 'object':
      return typeof value === 'object' && value !== null && !Array.isArray(value);
    case 'array':
      return Array.isArray(value);
    case 'string':
      return typeof value === 'string';
    case 'number':
      return typeof value === 'number' && Number.isFinite(value);
    case 'integer':
      return typeof value === 'number' && Number.isInteger(value);
    case 'boolean':
      return typeof value === 'boolean';
    case 'null':
      return value === null;
    default:
      throw new Error(`recording schema: unknown type ${show(type)}`);
  }
}

const ARTICLE: Record<string, string> = {
  object: 'an object',
  array: 'an array',
  string: 'a string',
  number: 'a finite number',
  integer: 'an integer',
  boolean: 'a boolean',
  null: 'null',
};

/** Path of a member: `ending.elapsedMs`, `dispatches[0].n`. */
function member(path: string, key: string | number): string {
  if (typeof key === 'number') return `${path}[${key}]`;
  return path === '' ? key : `${path}.${key}`;
}

/** A compiled check: why `value` (at `path`) does not conform, or undefined. */
type Check = (value: unknown, path: string) => string | undefined;

/** Compiles a schema of the keywords in CHECKED into a check (throws on any other keyword). */
export function compileSchema(root: Schema): Check {
  const defs = (root.$defs ?? {}) as Record<string, Schema>;
  const compiled = new Map<Schema, Check>();

  function compile(schema: Schema): Check {
    const known = compiled.get(schema);
    if (known !== undefined) return known;
    // Set before compiling the parts, so a recursive $ref finds it.
    let check: Check = () => undefined;
    compiled.set(schema, (value, path) => check(value, path));
    for (const keyword of Object.keys(schema)) {
      if (!ANNOTATIONS.has(keyword) && !CHECKED.has(keyword))
        throw new Error(`recording schema: the reader does not understand the keyword ${keyword}`);
    }
    const parts: Check[] = [];
    if (typeof schema.$ref === 'string') {
      const name = /^#\/\$defs\/([^/]+)$/.exec(schema.$ref)?.[1];
      const target = name === undefined ? undefined : defs[name];
      if (target === undefined)
        throw new Error(`recording schema: unresolvable $ref ${schema.$ref}`);
      parts.push(compile(target));
    }
    if ('const' in schema) {
      const expected = schema.const;
      if (typeof expected === 'object' && expected !== null)
        throw new Error('recording schema: const of an object is not supported');
      parts.push((value, path) =>
        value === expected ? undefined : `${path} is ${show(value)}, expected ${show(expected)}`,
      );
    }
    if (typeof schema.type === 'string') {
      const type = schema.type;
      parts.push((value, path) =>
        isType(value, type)
          ? undefined
          : `${path === '' ? 'the line' : path} is ${show(value)}, expected ${ARTICLE[type] ?? type}`,
      );
    }
    if (typeof schema.minimum === 'number') {
      const minimum = schema.minimum;
      parts.push((value, path) =>
        typeof value === 'number' && value < minimum
          ? `${path} is ${show(value)}, expected at least ${minimum}`
          : undefined,
      );
    }
    if (Array.isArray(schema.required)) {
      const required = schema.required as string[];
      parts.push((value, path) => {
        if (!isType(value, 'object')) return undefined;
        for (const key of required)
          if ((value as Record<string, unknown>)[key] === undefined)
            return `${member(path, key)} is missing`;
        return undefined;
      });
    }
    if (typeof schema.properties === 'object' && schema.properties !== null) {
      const properties = Object.entries(schema.properties as Record<string, Schema>).map(
        ([key, sub]) => [key, compile(sub)] as const,
      );
      const allowed = new Set(properties.map(([key]) => key));
      const closed = schema.additionalProperties === false;
      parts.push((value, path) => {
        if (!isType(value, 'object')) return undefined;
        const object = value as Record<string, unknown>;
        for (const [key, sub] of properties) {
          // Absent or undefined (as ajv reads it): the `required` check speaks for those needed.
          if (object[key] === undefined) continue;
          const problem = sub(object[key], member(path, key));
          if (problem !== undefined) return problem;
        }
        if (closed) {
          for (const key of Object.keys(object))
            if (!allowed.has(key)) return `${member(path, key)} is not a field of the format`;
        }
        return undefined;
      });
    } else if (schema.additionalProperties !== undefined) {
      throw new Error('recording schema: additionalProperties without properties');
    }
    if (typeof schema.items === 'object' && schema.items !== null) {
      const items = compile(schema.items as Schema);
      parts.push((value, path) => {
        if (!Array.isArray(value)) return undefined;
        for (let i = 0; i < value.length; i++) {
          const problem = items(value[i], member(path, i));
          if (problem !== undefined) return problem;
        }
        return undefined;
      });
    }
    check = (value, path) => {
      for (const part of parts) {
        const problem = part(value, path);
        if (problem !== undefined) return problem;
      }
      return undefined;
    };
    return check;
  }

  return compile(root);
}

let cached: Check | undefined;

/** The schema shipped with the package, compiled once on first use. */
export function recordingSchemaCheck(): Check {
  if (cached === undefined) {
    const url = new URL('../../schemas/recording.schema.json', import.meta.url);
    cached = compileSchema(JSON.parse(readFileSync(url, 'utf8')) as Schema);
  }
  return cached;
}
