// The examples of api/rest/openapi.json are what contract-testing tools (schemathesis and the
// like) send first, so they must be able to reach each operation's success path: every
// parameter and every JSON request body has at least one, and every example in the document
// is valid against its own schema. What the schemas cannot say (that a CID is a CID, that an
// origin is a multiaddress naming its peer, that a key has the shape of the service's keys,
// that CORS rules are ones the service accepts) is checked with the service's own parsers. So are the response links that lead tools from
// a created resource to the operations on it. Needs no server.
import { multiaddr } from '@multiformats/multiaddr';
import { validateCors, type CorsInput } from '../../core/cors.js';
import { parseCid } from '../../infra/ipfs/cid.js';
import { API_KEY_PREFIX, API_KEY_PREFIX_LENGTH } from '../../infra/constants.js';
import { looksLikeApiKey } from '../../infra/secrets.js';
import { ajv, compile, deref, doc, walk } from '../support/openapi.js';

const METHODS = ['get', 'put', 'post', 'delete', 'options', 'head', 'patch', 'trace'];

interface Example {
  /** Where it is in the document, for messages. */
  where: string;
  value: unknown;
}

/** The examples of a Parameter, Header or Media Type Object: `example`, or the values of `examples`. */
function examplesOf(holder: any, where: string): Example[] {
  if (holder.example !== undefined && holder.examples !== undefined) throw new Error(`${where} has both example and examples`);
  if (holder.example !== undefined) return [{ where: `${where}/example`, value: holder.example }];
  return Object.entries(holder.examples ?? {}).map(([name, ex]) => {
    const resolved = deref(ex);
    if (resolved.externalValue !== undefined) throw new Error(`${where}/examples/${name} is external; give it a value`);
    return { where: `${where}/examples/${name}`, value: resolved.value };
  });
}

/** Every operation with its parameters (path item's and its own, resolved) and request body. */
const operations = Object.entries(doc.paths).flatMap(([p, item]: [string, any]) =>
  Object.keys(item)
    .filter((m) => METHODS.includes(m))
    .map((m) => {
      const op = item[m];
      const where = `${m.toUpperCase()} ${p}`;
      const own = (op.parameters ?? []).map(deref);
      const inherited = (item.parameters ?? []).map(deref).filter((q: any) => !own.some((o: any) => o.name === q.name && o.in === q.in));
      return {
        where,
        operationId: op.operationId as string,
        parameters: [...inherited, ...own],
        requestBody: op.requestBody ? deref(op.requestBody) : undefined,
      };
    }),
);

/** Keywords whose values are instances, not schemas. */
const INSTANCES = ['examples', 'default', 'const', 'enum'];

const isJson = (mediaType: string) => /^application\/(.+\+)?json$/.test(mediaType);

function assertValid(schema: object, example: Example): void {
  const validate = compile(schema);
  if (!validate(example.value)) {
    throw new Error(
      `${example.where} is not valid against its schema: ${ajv.errorsText(validate.errors)}\n${JSON.stringify(example.value)}`,
    );
  }
}

/**
 * Properties whose text is JSON with a `contentSchema` (multipart `metadata`): ajv takes
 * contentSchema as an annotation only, so the decoded text is checked here.
 */
function assertContentValid(schema: any, example: Example): void {
  const properties = deref(schema)?.properties ?? {};
  if (example.value === null || typeof example.value !== 'object') return;
  for (const [name, property] of Object.entries<any>(properties)) {
    const text = (example.value as Record<string, unknown>)[name];
    if (property.contentMediaType !== 'application/json' || !property.contentSchema || typeof text !== 'string') continue;
    let decoded: unknown;
    try {
      decoded = JSON.parse(text);
    } catch {
      throw new Error(`${example.where}: ${name} is not JSON text`);
    }
    assertValid(property.contentSchema, { where: `${example.where}/${name} (decoded)`, value: decoded });
  }
}

const isKeyPrefix = (value: string) =>
  value.length === API_KEY_PREFIX_LENGTH && value.startsWith(API_KEY_PREFIX) && /^[0-9A-Za-z]+$/.test(value.slice(API_KEY_PREFIX.length));

/** Checks the request validators make that the schemas do not express, by the name of a value. */
function assertMeaningful(name: string, value: unknown, where: string): void {
  const fail = (why: string) => {
    throw new Error(`${where}: ${name} ${JSON.stringify(value)} ${why}`);
  };
  if (name === 'cid') {
    if (typeof value !== 'string') return fail('is not a string');
    try {
      parseCid(value);
    } catch {
      fail('is not a CID');
    }
  } else if (name === 'origins') {
    if (!Array.isArray(value)) return fail('is not an array');
    for (const origin of value) {
      let protocols: string[] = [];
      try {
        protocols = multiaddr(String(origin))
          .getComponents()
          .map((c) => c.name);
      } catch {
        fail(`has ${origin}, which is not a multiaddress`);
      }
      if (!protocols.includes('p2p')) fail(`has ${origin}, which does not name its peer (/p2p/…)`);
    }
  } else if (name === 'apiKey') {
    if (typeof value !== 'string' || !looksLikeApiKey(value)) fail('is not shaped like an API key');
  } else if (name === 'keyPrefix') {
    if (typeof value !== 'string' || !isKeyPrefix(value)) fail('is not the first 12 characters of an API key');
  } else if (name === 'CORSRules') {
    // The rules S3 checks, by the use-case that checks them (rule by rule, field by field).
    try {
      validateCors({ CORSRules: value as CorsInput['CORSRules'] });
    } catch (err) {
      fail(`is refused: ${(err as Error).message}`);
    }
  } else if (name === 'key') {
    // The path parameter of DELETE /apikeys/{key}: a full key or its prefix.
    if (typeof value !== 'string' || !(looksLikeApiKey(value) || isKeyPrefix(value))) fail('is neither an API key nor a key prefix');
  }
}

/** assertMeaningful on every named value inside an example (object properties, at any depth). */
function assertMeaningfulInside(example: Example): void {
  for (const [at, node] of walk({ value: example.value })) {
    if (Array.isArray(node)) continue;
    const where = at.length > 1 ? `${example.where}, at ${at.slice(1).join('/')}` : example.where;
    for (const [name, value] of Object.entries(node)) assertMeaningful(name, value, where);
  }
}

describe('examples in the OpenAPI document', () => {
  test('the document has operations with parameters and JSON request bodies to check', () => {
    expect(operations.length).toBeGreaterThan(10);
    expect(operations.flatMap((o) => o.parameters).length).toBeGreaterThan(8);
    expect(operations.filter((o) => o.requestBody?.content?.['application/json']).length).toBeGreaterThan(5);
  });

  test('every parameter has an example, valid against its schema and for the request validators', () => {
    for (const { where, parameters } of operations) {
      for (const parameter of parameters) {
        const at = `${where} ${parameter.in} parameter ${parameter.name}`;
        // A parameter is described by a schema, or by `content` (PSA's `meta`: JSON in the query).
        const described = parameter.schema ? parameter : Object.values<any>(parameter.content ?? {})[0];
        const examples = examplesOf(described, at);
        if (examples.length === 0) throw new Error(`${at} has no example`);
        for (const example of examples) {
          assertValid(described.schema, example);
          if (parameter.schema) assertMeaningful(parameter.name, example.value, example.where);
          else assertMeaningfulInside(example);
        }
      }
    }
  });

  test('every JSON request body has an example, and every request body example is valid against its schema and for the request validators', () => {
    for (const { where, requestBody } of operations) {
      for (const [mediaType, media] of Object.entries<any>(requestBody?.content ?? {})) {
        const at = `${where} request body ${mediaType}`;
        const examples = examplesOf(media, at);
        if (isJson(mediaType) && examples.length === 0) throw new Error(`${at} has no example`);
        for (const example of examples) {
          assertValid(media.schema, example);
          assertContentValid(media.schema, example);
          assertMeaningfulInside(example);
        }
      }
    }
  });

  test('every example in the document, of responses and components too, is valid against its schema', () => {
    let checked = 0;
    // Media types and headers of responses, and reusable parameters and headers.
    for (const [at, node] of walk(doc)) {
      const holdsExamples = node.schema && (node.example !== undefined || node.examples !== undefined);
      if (!holdsExamples) continue;
      for (const example of examplesOf(node, at.join('/'))) {
        assertValid(node.schema, example);
        assertMeaningfulInside(example);
        checked++;
      }
    }
    // `examples` of schemas (JSON Schema's keyword: an array of instances), at any depth.
    const roots = [...walk(doc)].filter(
      ([at]) =>
        at.at(-1) === 'schema' || at.at(-1) === 'contentSchema' || (at.length === 3 && at[0] === 'components' && at[1] === 'schemas'),
    );
    for (const [rootAt, root] of roots) {
      for (const [at, schema] of walk(root, rootAt)) {
        // Not schemas: a map of them, and instances (examples, defaults, constants).
        if (at.at(-1) === 'properties' || at.slice(rootAt.length).some((k) => INSTANCES.includes(k))) continue;
        if (schema.example !== undefined) throw new Error(`${at.join('/')} uses example, deprecated in OpenAPI 3.1: use examples`);
        if (!Array.isArray(schema.examples)) continue;
        schema.examples.forEach((value: unknown, i: number) => {
          const example = { where: `${at.join('/')}/examples/${i}`, value };
          assertValid(schema, example);
          assertMeaningfulInside(example);
          checked++;
        });
      }
    }
    expect(checked).toBeGreaterThan(20);
  });

  // Links are how tools reach the success path of operations on resources an example cannot
  // name (a key just created, a CID just uploaded): each must name a real operation, its
  // parameters, and a property the response has.
  test('every link names an existing operation, its parameters, and properties of the response', () => {
    const byId = new Map(operations.map((o) => [o.operationId, o]));
    let checked = 0;
    for (const [at, response] of walk(doc)) {
      if (!response.links || !response.content) continue;
      const schema = deref(response.content['application/json']?.schema);
      for (const [name, link] of Object.entries<any>(response.links)) {
        const where = `${at.join('/')}/links/${name}`;
        const target = byId.get(link.operationId);
        if (!target) throw new Error(`${where} names ${link.operationId}, which is no operation`);
        for (const [parameter, expression] of Object.entries<string>(link.parameters ?? {})) {
          if (!target.parameters.some((p) => p.name === parameter))
            throw new Error(`${where}: ${target.where} has no parameter ${parameter}`);
          const property = /^\$response\.body#\/(\w+)$/.exec(expression)?.[1];
          if (!property || !schema?.properties?.[property]) throw new Error(`${where}: ${expression} is not a property of the response`);
          checked++;
        }
      }
    }
    expect(checked).toBeGreaterThan(5);
  });
});
