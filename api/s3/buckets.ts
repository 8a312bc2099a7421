// Bucket operations: ListBuckets, CreateBucket, DeleteBucket, HeadBucket, GetBucketLocation,
// the bucket's CORS configuration (the folder's document, shared with REST and the gateway),
// and the configurations clients read without this service having them (versioning, object
// lock, ACLs), answered as S3 answers a bucket without them.
import { createBucket, deleteBucket, listBuckets, ownBucket } from '../../core/s3/buckets.js';
import { deleteCors, getCors, putCors, type CorsInput } from '../../core/cors.js';
import { StupaError } from '../../core/errors.js';
import { readSmallBody } from './body.js';
import { isoDate, owner, sendEmpty, sendXml, type S3Context } from './context.js';
import { S3Error } from './errors.js';
import { toS3Error } from './failures.js';
import { parseXml } from './xml.js';

/** ListBuckets: the caller's buckets by name (at most BUCKETS_MAX of them), after `continuation-token`,
 * under `prefix`, `max-buckets` a page (without it, all); the next page's token when there is one. */
export async function listAllBuckets(ctx: S3Context): Promise<void> {
  const prefix = ctx.query.get('prefix') ?? '';
  const token = ctx.query.get('continuation-token');
  const after = token ? Buffer.from(token, 'base64url').toString('utf8') : '';
  const maxText = ctx.query.get('max-buckets');
  const max = maxText === null ? Infinity : Number(maxText);
  if (maxText !== null && (!/^\d+$/.test(maxText) || max < 1 || max > 10_000)) {
    throw new S3Error('InvalidArgument', 'max-buckets must be an integer from 1 to 10000');
  }
  const all = (await listBuckets(ctx.deps, ctx.caller)).filter((b) => b._id.startsWith(prefix) && b._id > after);
  const page = all.slice(0, max);
  const more = all.length > page.length;
  sendXml(ctx, 200, 'ListAllMyBucketsResult', {
    Owner: owner(ctx),
    Buckets: { Bucket: page.map((b) => ({ Name: b._id, CreationDate: isoDate(b.createdAt), BucketRegion: ctx.deps.config.s3.region })) },
    ...(more ? { ContinuationToken: Buffer.from(page[page.length - 1]!._id).toString('base64url') } : {}),
    ...(ctx.query.has('prefix') ? { Prefix: prefix } : {}),
  });
}

export async function putBucket(ctx: S3Context, bucket: string): Promise<void> {
  // A CreateBucketConfiguration (a location constraint) may come; any region is this one.
  await readSmallBody(ctx.req, ctx.auth, 64 * 1024);
  // S3's code since buckets are made with ACLs disabled (BucketOwnerEnforced) by default.
  assertPrivateAcl(ctx, 'InvalidBucketAclWithObjectOwnership');
  // Object Lock needs versions, which buckets here do not keep: a bucket asked for with it is
  // refused rather than made without it.
  if (String(ctx.req.headers['x-amz-bucket-object-lock-enabled']).toLowerCase() === 'true') {
    throw new S3Error('NotImplemented', 'Object Lock is not supported: buckets here keep no object versions.');
  }
  try {
    await createBucket(ctx.deps, ctx.caller, bucket);
  } catch (err) {
    // S3 in us-east-1 answers 200 to the owner creating its bucket again (its legacy rule);
    // every other region answers BucketAlreadyOwnedByYou.
    const owned = toS3Error(err)?.code === 'BucketAlreadyOwnedByYou';
    if (!owned || ctx.deps.config.s3.region !== 'us-east-1') throw err;
  }
  sendEmpty(ctx, 200, { location: `/${bucket}` });
}

export async function removeBucket(ctx: S3Context, bucket: string): Promise<void> {
  await deleteBucket(ctx.deps, ctx.caller, bucket);
  sendEmpty(ctx, 204);
}

export async function headBucket(ctx: S3Context, bucket: string): Promise<void> {
  await ownBucket(ctx.deps, ctx.caller, bucket);
  sendEmpty(ctx, 200, { 'x-amz-bucket-region': ctx.deps.config.s3.region });
}

export async function bucketLocation(ctx: S3Context, bucket: string): Promise<void> {
  await ownBucket(ctx.deps, ctx.caller, bucket);
  const region = ctx.deps.config.s3.region;
  // S3 names us-east-1 by saying nothing.
  sendXml(ctx, 200, 'LocationConstraint', { '#text': region === 'us-east-1' ? '' : region });
}

export async function bucketVersioning(ctx: S3Context, bucket: string): Promise<void> {
  await ownBucket(ctx.deps, ctx.caller, bucket);
  sendXml(ctx, 200, 'VersioningConfiguration', {});
}

export async function objectLockConfiguration(ctx: S3Context, bucket: string): Promise<void> {
  await ownBucket(ctx.deps, ctx.caller, bucket);
  throw new S3Error('ObjectLockConfigurationNotFoundError', 'Object Lock configuration does not exist for this bucket');
}

/** PutObjectLockConfiguration: S3's answer for a bucket made without Object Lock, as every bucket here is. */
export async function putObjectLockConfiguration(ctx: S3Context, bucket: string): Promise<void> {
  await ownBucket(ctx.deps, ctx.caller, bucket);
  throw new S3Error(
    'InvalidBucketState',
    'Object Lock configuration cannot be enabled on this bucket: buckets here keep no object versions.',
  );
}

/** Get/PutObjectRetention and Get/PutObjectLegalHold: S3's answer in a bucket without Object Lock. */
export async function objectLockOfObject(ctx: S3Context, bucket: string): Promise<void> {
  await ownBucket(ctx.deps, ctx.caller, bucket);
  throw new S3Error('InvalidRequest', 'Bucket is missing Object Lock Configuration');
}

/** The one ACL there is: the owner's FULL_CONTROL. */
export async function getAcl(ctx: S3Context, bucket: string): Promise<void> {
  await ownBucket(ctx.deps, ctx.caller, bucket);
  if (ctx.key !== null) {
    const { getObject } = await import('../../core/s3/objects.js');
    await getObject(ctx.deps, ctx.caller, bucket, ctx.key);
  }
  sendXml(ctx, 200, 'AccessControlPolicy', {
    Owner: owner(ctx),
    AccessControlList: {
      Grant: [
        {
          Grantee: { '@_xmlns:xsi': 'http://www.w3.org/2001/XMLSchema-instance', '@_xsi:type': 'CanonicalUser', ...owner(ctx) },
          Permission: 'FULL_CONTROL',
        },
      ],
    },
  });
}

/**
 * `private` (the only ACL there is) is accepted; anything granting more is refused, whether a
 * canned ACL, grant headers or an AccessControlPolicy document (s3cmd's `setacl --acl-public`
 * sends one granting AllUsers READ: answered 200 and ignored, it told the client the object was
 * public while it stayed private).
 */
export async function putAcl(ctx: S3Context, bucket: string): Promise<void> {
  await ownBucket(ctx.deps, ctx.caller, bucket);
  const body = await readSmallBody(ctx.req, ctx.auth, 64 * 1024);
  assertPrivateAcl(ctx);
  if (body.length > 0) assertOwnerOnlyPolicy(ctx, body);
  sendEmpty(ctx, 200);
}

/** The grant headers S3 takes beside a canned ACL (each a list of grantees). */
const GRANT_HEADERS = [
  'x-amz-grant-read',
  'x-amz-grant-write',
  'x-amz-grant-read-acp',
  'x-amz-grant-write-acp',
  'x-amz-grant-full-control',
];

/**
 * The request's canned ACL (a header, or a presigned URL's parameter) is `private` or none, and
 * its grant headers name the owner alone (`id="<the owner's ID>"`).
 */
export function assertPrivateAcl(
  ctx: S3Context,
  code: 'AccessControlListNotSupported' | 'InvalidBucketAclWithObjectOwnership' = 'AccessControlListNotSupported',
): void {
  const field = (name: string) => ctx.req.headers[name] ?? ctx.auth.hoisted[name];
  const acl = field('x-amz-acl');
  if (acl !== undefined && acl !== 'private' && acl !== 'bucket-owner-full-control') {
    throw new S3Error(code, `objects here are private; the ACL ${String(acl)} cannot be set`);
  }
  for (const name of GRANT_HEADERS) {
    const value = field(name);
    if (value === undefined) continue;
    const grantees = String(value)
      .split(',')
      .map((g) => g.trim());
    if (!grantees.every((g) => /^id\s*=\s*"?([^"]*)"?$/i.exec(g)?.[1] === ctx.caller.user._id)) {
      throw new S3Error(code, `objects here are private; ${name} may name the owner alone`);
    }
  }
}

/** An AccessControlPolicy document whose grants all go to the owner (its FULL_CONTROL, as GetObjectAcl shows). */
function assertOwnerOnlyPolicy(ctx: S3Context, body: Buffer): void {
  const doc = parseXml(body, ['AccessControlPolicy.AccessControlList.Grant']);
  const policy = doc.AccessControlPolicy as { AccessControlList?: { Grant?: { Grantee?: Record<string, unknown> }[] } | '' } | undefined;
  if (!policy || typeof policy !== 'object') throw new S3Error('MalformedACLError');
  const grants = (typeof policy.AccessControlList === 'object' ? policy.AccessControlList.Grant : undefined) ?? [];
  for (const grant of grants) {
    const grantee = grant?.Grantee;
    if (!grantee || typeof grantee !== 'object') throw new S3Error('MalformedACLError');
    if (grantee.ID !== ctx.caller.user._id) {
      throw new S3Error('AccessControlListNotSupported', 'objects here are private; an ACL may grant to the owner alone');
    }
  }
}

export async function getBucketCors(ctx: S3Context, bucket: string): Promise<void> {
  const { folderId } = await ownBucket(ctx.deps, ctx.caller, bucket);
  const configuration = await getCors(ctx.deps, ctx.caller.user._id, folderId);
  sendXml(ctx, 200, 'CORSConfiguration', {
    CORSRule: configuration.CORSRules.map((r) => ({
      ...(r.ID !== undefined ? { ID: r.ID } : {}),
      AllowedOrigin: r.AllowedOrigins,
      AllowedMethod: r.AllowedMethods,
      ...(r.AllowedHeaders ? { AllowedHeader: r.AllowedHeaders } : {}),
      ...(r.ExposeHeaders ? { ExposeHeader: r.ExposeHeaders } : {}),
      ...(r.MaxAgeSeconds !== undefined ? { MaxAgeSeconds: r.MaxAgeSeconds } : {}),
    })),
  });
}

type XmlCorsRule = {
  ID?: string;
  AllowedOrigin?: string[];
  AllowedMethod?: string[];
  AllowedHeader?: string[];
  ExposeHeader?: string[];
  MaxAgeSeconds?: string;
};

export async function putBucketCors(ctx: S3Context, bucket: string): Promise<void> {
  const { folderId } = await ownBucket(ctx.deps, ctx.caller, bucket);
  const body = await readSmallBody(ctx.req, ctx.auth, 64 * 1024);
  const doc = parseXml(body.toString('utf8'), [
    'CORSConfiguration.CORSRule',
    ...['AllowedOrigin', 'AllowedMethod', 'AllowedHeader', 'ExposeHeader'].map((f) => `CORSConfiguration.CORSRule.${f}`),
  ]) as {
    CORSConfiguration?: { CORSRule?: XmlCorsRule[] };
  };
  if (!doc.CORSConfiguration) throw new S3Error('MalformedXML', 'the body is not a CORSConfiguration');
  const input: CorsInput = {
    CORSRules: (doc.CORSConfiguration.CORSRule ?? []).map((r) => ({
      ...(r.ID !== undefined ? { ID: String(r.ID) } : {}),
      AllowedOrigins: r.AllowedOrigin?.map(String),
      AllowedMethods: r.AllowedMethod?.map(String),
      ...(r.AllowedHeader ? { AllowedHeaders: r.AllowedHeader.map(String) } : {}),
      ...(r.ExposeHeader ? { ExposeHeaders: r.ExposeHeader.map(String) } : {}),
      ...(r.MaxAgeSeconds !== undefined ? { MaxAgeSeconds: Number(r.MaxAgeSeconds) } : {}),
    })),
  };
  await putCors(ctx.deps, ctx.caller.user._id, folderId, input);
  sendEmpty(ctx, 200);
}

export async function deleteBucketCors(ctx: S3Context, bucket: string): Promise<void> {
  const { folderId } = await ownBucket(ctx.deps, ctx.caller, bucket);
  // S3 answers 204 whether there was a configuration or not.
  await deleteCors(ctx.deps, ctx.caller.user._id, folderId).catch((err: unknown) => {
    if (!(err instanceof StupaError && err.reason === 'NO_CORS_CONFIGURATION')) throw err;
  });
  sendEmpty(ctx, 204);
}
