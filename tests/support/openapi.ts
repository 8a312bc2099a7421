// The OpenAPI document as tests read it: references followed, every node walked, and its
// schemas compiled by a strict JSON Schema 2020-12 validator (the OpenAPI 3.1 dialect: an
// unknown or misplaced keyword is an error, not an annotation that silently validates nothing).
import fs from 'node:fs';
import { Ajv2020, type ValidateFunction } from 'ajv/dist/2020.js';
import { openApiPath } from '../../api/rest/app.js';

export const doc = JSON.parse(fs.readFileSync(openApiPath, 'utf8'));

export function pointerGet(pointer: string): any {
  if (!pointer.startsWith('#/')) throw new Error(`only local references are used: ${pointer}`);
  let node: any = doc;
  for (const part of pointer.slice(2).split('/')) {
    const key = decodeURIComponent(part).replace(/~1/g, '/').replace(/~0/g, '~');
    if (node === null || typeof node !== 'object' || !(key in node)) throw new Error(`${pointer} does not resolve`);
    node = node[key];
  }
  return node;
}

/** Follows Reference Objects (responses, parameters, headers, examples) to what they name. */
export function deref(node: any): any {
  for (let hops = 0; node && typeof node.$ref === 'string'; hops++) {
    if (hops > 10) throw new Error('reference loop');
    node = pointerGet(node.$ref);
  }
  return node;
}

export function* walk(node: any, path: string[] = []): Generator<[string[], any]> {
  if (node === null || typeof node !== 'object') return;
  yield [path, node];
  for (const [k, v] of Object.entries(node)) yield* walk(v, [...path, k]);
}

const BASE = 'https://stupa.invalid/openapi.json';
const SCHEMAS = '#/components/schemas/';
/** The schema with its references to components made absolute, into a resource of their own. */
const absolute = (schema: unknown): object =>
  JSON.parse(JSON.stringify(schema), (key, value) => {
    if (key !== '$ref' || typeof value !== 'string') return value;
    if (!value.startsWith(SCHEMAS)) throw new Error(`a schema refers to ${value}, which is not a schema`);
    return `${BASE}#/$defs/${value.slice(SCHEMAS.length)}`;
  });
export const ajv = new Ajv2020({ strict: true, allowUnionTypes: true, allErrors: true });
ajv.addSchema(absolute({ $id: BASE, $defs: doc.components.schemas }));
const compiled = new Map<unknown, ValidateFunction>();

/** A validator for a schema of the document (compiled once). */
export function compile(schema: object): ValidateFunction {
  let fn = compiled.get(schema);
  if (!fn) compiled.set(schema, (fn = ajv.compile(absolute(schema))));
  return fn;
}
