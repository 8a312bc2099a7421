// What the service needs of a Temporal server, set up or checked: its namespace, and the
// Keyword search attributes the contracts set (contracts/job.ts SEARCH_ATTRIBUTES). The worker
// sets up at start (TEMPORAL_SETUP=auto), an operator with `npm run admin -- temporal setup`;
// /readyz, a worker with TEMPORAL_SETUP=off and the local stack only check. Both work on any
// Temporal (the dev server, a cluster of services, a hosted one), and setting up twice, or two
// workers at once, is harmless.
import { isGrpcServiceError, type Connection, type TLSConfig } from '@temporalio/client';
import { msToTs } from '@temporalio/common/lib/time.js';
import type { Config } from '../config.js';
import { TEMPORAL_SETUP_WAIT_MS } from '../constants.js';
import { TemporalSetupError } from '../errors.js';
import { SEARCH_ATTRIBUTES } from './contracts/job.js';

// gRPC status codes (@grpc/grpc-js `status`) as Temporal's frontend answers them.
const NOT_FOUND = 5;
const ALREADY_EXISTS = 6;
const PERMISSION_DENIED = 7;
const UNIMPLEMENTED = 12;
// temporal.api.enums.v1.IndexedValueType, by number.
const KEYWORD = 2;
const TYPE_NAMES = ['Unspecified', 'Text', 'Keyword', 'Int', 'Double', 'Bool', 'Datetime', 'KeywordList'];
const DAY_MS = 86_400_000;
const SETUP_HINT = 'run npm run admin -- temporal setup';

/** What `Connection.connect` (@temporalio/client) and `NativeConnection.connect`
 * (@temporalio/worker) both take. */
export interface TemporalConnectionOptions {
  address: string;
  tls?: TLSConfig | false;
  apiKey?: string;
}

export function connectionOptions(t: Pick<Config['temporal'], 'address' | 'tls' | 'apiKey'>): TemporalConnectionOptions {
  const tls: TLSConfig | undefined = t.tls && {
    ...(t.tls.serverName ? { serverNameOverride: t.tls.serverName } : {}),
    ...(t.tls.ca ? { serverRootCACertificate: t.tls.ca } : {}),
    ...(t.tls.clientCert ? { clientCertPair: t.tls.clientCert } : {}),
  };
  return {
    address: t.address,
    // Given an API key and no TLS setting, the SDKs turn TLS on by themselves: TEMPORAL_TLS=false
    // with a key must say so.
    ...(tls ? { tls } : t.apiKey ? { tls: false } : {}),
    ...(t.apiKey ? { apiKey: t.apiKey } : {}),
  };
}

/** What one setup did: an existing namespace is never changed (namespaceRetentionDays reports
 * its retention). */
export interface TemporalSetup {
  namespaceCreated: boolean;
  /** The search attributes this call added, in SEARCH_ATTRIBUTES order. */
  searchAttributesAdded: string[];
}

/**
 * Registers the namespace with `retentionDays` unless it exists, and adds the search
 * attributes it lacks, as Keyword. A freshly registered namespace is known to every service of
 * a Temporal cluster only after their namespace caches refresh (about 10 s): until then adding
 * attributes answers NOT_FOUND, and their listing lags; both are awaited up to
 * TEMPORAL_SETUP_WAIT_MS, so a check right after passes. Throws a TemporalSetupError for an
 * attribute of another type, or when the wait runs out; gRPC errors (PERMISSION_DENIED from a
 * key that may not register namespaces, an unreachable server) as they are.
 */
export async function setupTemporal(connection: Connection, options: { namespace: string; retentionDays: number }): Promise<TemporalSetup> {
  const { namespace } = options;
  let namespaceCreated = false;
  if (!(await describe(connection, namespace))) {
    try {
      await connection.workflowService.registerNamespace({
        namespace,
        description: 'Stupa: pins, uploads, IPNS names, webhooks',
        workflowExecutionRetentionPeriod: msToTs(options.retentionDays * DAY_MS),
      });
      namespaceCreated = true;
    } catch (err) {
      // Another worker's setup registered it between our describe and register: theirs stands.
      if (grpcCode(err) !== ALREADY_EXISTS) throw err;
    }
  }
  const searchAttributesAdded = await addSearchAttributes(connection, namespace);
  return { namespaceCreated, searchAttributesAdded };
}

/** The namespace's retention of closed workflows, in days; undefined when it does not exist. */
export async function namespaceRetentionDays(connection: Connection, namespace: string): Promise<number | undefined> {
  const description = await describe(connection, namespace);
  if (!description) return undefined;
  return Number(description.config?.workflowExecutionRetentionTtl?.seconds ?? 0) / (DAY_MS / 1000);
}

/** Throws a TemporalSetupError that says what to do unless the namespace exists with every
 * search attribute as Keyword. */
export async function checkTemporalSetup(connection: Connection, namespace: string): Promise<void> {
  const where = `namespace "${namespace}" on ${addressOf(connection)}`;
  const missingNamespace = () =>
    new TemporalSetupError(`namespace "${namespace}" does not exist on ${addressOf(connection)}: ${SETUP_HINT}`);
  if (!(await describe(connection, namespace))) throw missingNamespace();
  let listed: Listing;
  try {
    listed = await connection.operatorService.listSearchAttributes({ namespace });
  } catch (err) {
    throw grpcCode(err) === NOT_FOUND ? missingNamespace() : err;
  }
  const missing = missingAttributes(listed, where);
  if (missing.length > 0) {
    const [noun, verb] = missing.length > 1 ? ['search attributes', 'are'] : ['search attribute', 'is'];
    throw new TemporalSetupError(`${noun} ${missing.join(', ')} ${verb} missing in ${where}: ${SETUP_HINT}`);
  }
}

/** True for an answer that says this server or key does not let the service set up: a hosted
 * Temporal whose API key may not register namespaces, or one without the operator service. */
export function isSetupRefused(err: unknown): boolean {
  const code = grpcCode(err);
  return code === PERMISSION_DENIED || code === UNIMPLEMENTED;
}

type Listing = Awaited<ReturnType<Connection['operatorService']['listSearchAttributes']>>;
type Description = Awaited<ReturnType<Connection['workflowService']['describeNamespace']>>;

async function addSearchAttributes(connection: Connection, namespace: string): Promise<string[]> {
  const where = `namespace "${namespace}" on ${addressOf(connection)}`;
  const deadline = Date.now() + TEMPORAL_SETUP_WAIT_MS;
  const added: string[] = [];
  let waitingFor = '';
  for (;;) {
    try {
      const missing = missingAttributes(await connection.operatorService.listSearchAttributes({ namespace }), where);
      if (missing.length === 0) return SEARCH_ATTRIBUTES.filter((name) => added.includes(name));
      const toAdd = missing.filter((name) => !added.includes(name));
      if (toAdd.length > 0) {
        await connection.operatorService.addSearchAttributes({
          namespace,
          searchAttributes: Object.fromEntries(toAdd.map((name) => [name, KEYWORD])),
        });
        added.push(...toAdd);
        continue;
      }
      waitingFor = `${missing.join(', ')} added but not listed yet`;
    } catch (err) {
      if (err instanceof TemporalSetupError || grpcCode(err) !== NOT_FOUND) throw err;
      waitingFor = `the namespace not found yet: ${(err as Error).message}`;
    }
    if (Date.now() >= deadline) {
      throw new TemporalSetupError(
        `the search attributes of ${where} are not set up after ${TEMPORAL_SETUP_WAIT_MS / 1000} s (${waitingFor}); ` +
          `Temporal's services may not have refreshed their namespace caches yet: ${SETUP_HINT} again`,
      );
    }
    await new Promise((resolve) => setTimeout(resolve, 1000));
  }
}

/** The names of SEARCH_ATTRIBUTES the listing lacks; one there with another type is an error
 * setup cannot mend (the attribute may hold the values of others). */
function missingAttributes(listed: Listing, where: string): string[] {
  const missing: string[] = [];
  for (const name of SEARCH_ATTRIBUTES) {
    const type = listed.customAttributes?.[name] ?? listed.systemAttributes?.[name];
    if (type === undefined || type === null) missing.push(name);
    else if (Number(type) !== KEYWORD) {
      throw new TemporalSetupError(
        `search attribute ${name} in ${where} is of type ${TYPE_NAMES[Number(type)] ?? type}, not Keyword: ` +
          `remove it (temporal operator search-attribute remove --name ${name}) or use another namespace`,
      );
    }
  }
  return missing;
}

/** The namespace, or undefined when it does not exist. */
async function describe(connection: Connection, namespace: string): Promise<Description | undefined> {
  try {
    return await connection.workflowService.describeNamespace({ namespace });
  } catch (err) {
    if (grpcCode(err) === NOT_FOUND) return undefined;
    throw err;
  }
}

const addressOf = (connection: Connection) => connection.options.address;

const grpcCode = (err: unknown): number | undefined => (isGrpcServiceError(err) ? err.code : undefined);
