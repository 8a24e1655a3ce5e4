/** The recording format's JSON Schema, compiled once with ajv (draft 2020-12), for the tests. */
import { readFileSync } from 'node:fs';
import { Ajv2020 } from 'ajv/dist/2020.js';

const schema = JSON.parse(
  readFileSync(new URL('../../schemas/recording.schema.json', import.meta.url), 'utf8'),
) as object;
const ajv = new Ajv2020({ allErrors: true, strict: true });
const validate = ajv.compile(schema);

/** The schema's complaints about one parsed line: `[]` when it conforms. */
export function schemaErrors(line: unknown): string[] {
  if (validate(line)) return [];
  return (validate.errors ?? []).map((e) => `${e.instancePath || '/'} ${e.message ?? ''}`);
}
