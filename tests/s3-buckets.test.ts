// S3 buckets with the AWS SDK for JavaScript v3 and its defaults: global names and ownership,
// paging, invalid and missing names, tenancy, deletes racing writes, Object Lock refused;
// virtual-host style; credentials and the errors of a signature, all in S3's XML.
import crypto from 'node:crypto';
import http from 'node:http';
import { PassThrough } from 'node:stream';
import {
  CreateBucketCommand,
  DeleteBucketCommand,
  DeleteObjectCommand,
  GetBucketLocationCommand,
  GetObjectAclCommand,
  GetObjectLockConfigurationCommand,
  GetObjectRetentionCommand,
  GetObjectCommand,
  HeadBucketCommand,
  HeadObjectCommand,
  ListBucketsCommand,
  ListObjectsV2Command,
  PutObjectCommand,
  PutObjectLegalHoldCommand,
  PutObjectAclCommand,
  PutObjectLockConfigurationCommand,
} from '@aws-sdk/client-s3';
import { bucketName, s3Client, s3Failure } from './support/s3.js';
import { call, createUser, startTestApi } from './support/stack.js';
import { alice, api, bobS3, env, newBucket, s3, text, used, useS3Accounts } from './support/s3-accounts.js';

useS3Accounts();

describe('buckets', () => {
  test('names are global: your own again is 200 in us-east-1 and BucketAlreadyOwnedByYou elsewhere, another account’s BucketAlreadyExists', async () => {
    const name = await newBucket(s3, 'global');
    await s3.send(new HeadBucketCommand({ Bucket: name }));
    await s3.send(new PutObjectCommand({ Bucket: name, Key: 'kept', Body: 'kept' }));
    // S3's legacy rule in us-east-1 (the default region): the owner's create answers 200 and changes nothing.
    await s3.send(new CreateBucketCommand({ Bucket: name }));
    expect((await s3.send(new ListObjectsV2Command({ Bucket: name }))).Contents!.map((o) => o.Key)).toEqual(['kept']);
    const elsewhere = await startTestApi({ ...env, S3_REGION: 'eu-west-1', MASTER_KEY: api.deps.config.masterKey.toString('hex') });
    const there = s3Client(elsewhere, alice);
    try {
      expect(await s3Failure(there.send(new CreateBucketCommand({ Bucket: name })))).toMatchObject({
        code: 'BucketAlreadyOwnedByYou',
        status: 409,
      });
    } finally {
      there.destroy();
      await elsewhere.close();
    }
    expect(await s3Failure(bobS3.send(new CreateBucketCommand({ Bucket: name })))).toMatchObject({
      code: 'BucketAlreadyExists',
      status: 409,
    });
    const mine = (await s3.send(new ListBucketsCommand({}))).Buckets!.map((b) => b.Name);
    const his = (await bobS3.send(new ListBucketsCommand({}))).Buckets!.map((b) => b.Name);
    expect(mine).toContain(name);
    expect(his).not.toContain(name);
    // Backed by a top-level folder of the same name (REST sees it).
    const folders = await call(api, 'GET', '/folders?parentFolderId=root', { key: alice.apiKey });
    expect(folders.body.items.map((f: { name: string }) => f.name)).toContain(name);
    expect((await s3.send(new GetBucketLocationCommand({ Bucket: name }))).LocationConstraint).toBeUndefined();
  });

  test('ListBuckets pages by max-buckets and continuation token, under a prefix', async () => {
    const prefix = `pages-${Math.random().toString(36).slice(2, 8)}-`;
    const names = [`${prefix}a`, `${prefix}b`];
    for (const name of names) await s3.send(new CreateBucketCommand({ Bucket: name }));
    const first = await s3.send(new ListBucketsCommand({ Prefix: prefix, MaxBuckets: 1 }));
    expect(first.Buckets!.map((b) => b.Name)).toEqual([names[0]]);
    expect(first.ContinuationToken).toBeDefined();
    const second = await s3.send(new ListBucketsCommand({ Prefix: prefix, MaxBuckets: 1, ContinuationToken: first.ContinuationToken }));
    expect([second.Buckets!.map((b) => b.Name), second.ContinuationToken]).toEqual([[names[1]], undefined]);
    expect((await s3.send(new ListBucketsCommand({ Prefix: prefix }))).Buckets!.map((b) => b.Name)).toEqual(names);
  });

  test('invalid names are InvalidBucketName; a missing bucket is NoSuchBucket', async () => {
    for (const bad of ['ab', 'UPPER', 'has_underscore', '-dash', '192.168.1.1', 'a..b', 'x'.repeat(64), 'dot.-dash', 'dash-.dot']) {
      expect(await s3Failure(s3.send(new CreateBucketCommand({ Bucket: bad })))).toMatchObject({ code: 'InvalidBucketName', status: 400 });
    }
    expect(await s3Failure(s3.send(new ListObjectsV2Command({ Bucket: bucketName('missing') })))).toMatchObject({
      code: 'NoSuchBucket',
      status: 404,
    });
  });

  test('another account’s bucket is AccessDenied for every call, its contents never shown', async () => {
    const name = await newBucket(s3, 'tenancy');
    await s3.send(new PutObjectCommand({ Bucket: name, Key: 'secret.txt', Body: 'for alice only' }));
    for (const attempt of [
      bobS3.send(new GetObjectCommand({ Bucket: name, Key: 'secret.txt' })),
      bobS3.send(new ListObjectsV2Command({ Bucket: name })),
      bobS3.send(new PutObjectCommand({ Bucket: name, Key: 'x', Body: 'x' })),
      bobS3.send(new DeleteObjectCommand({ Bucket: name, Key: 'secret.txt' })),
      bobS3.send(new DeleteBucketCommand({ Bucket: name })),
    ]) {
      const failure = await s3Failure(attempt);
      expect(failure).toMatchObject({ code: 'AccessDenied', status: 403 });
      expect(failure.message).not.toContain('alice only');
    }
    expect(await text(await s3.send(new GetObjectCommand({ Bucket: name, Key: 'secret.txt' })))).toBe('for alice only');
  });

  test('a bucket with objects is BucketNotEmpty; emptied, it goes', async () => {
    const name = await newBucket(s3, 'delete');
    await s3.send(new PutObjectCommand({ Bucket: name, Key: 'k', Body: 'v' }));
    expect(await s3Failure(s3.send(new DeleteBucketCommand({ Bucket: name })))).toMatchObject({ code: 'BucketNotEmpty', status: 409 });
    await s3.send(new DeleteObjectCommand({ Bucket: name, Key: 'k' }));
    await s3.send(new DeleteBucketCommand({ Bucket: name }));
    expect(await s3Failure(s3.send(new HeadBucketCommand({ Bucket: name })))).toMatchObject({ status: 404 });
    expect(await api.deps.db.buckets.get(name)).toBeNull();
  });

  test('a bucket deleted while an object’s body comes keeps no object: the PUT is NoSuchBucket, the name’s next owner finds nothing, the storage is given back', async () => {
    // A user of its own (the nirvana plan's request rate) leaves alice's for the tests after.
    const carol = await createUser(api, 'nirvana');
    const client = s3Client(api, carol);
    const name = await newBucket(client, 'racing');
    const before = await used(carol);
    const data = crypto.randomBytes(300_000);
    const body = new PassThrough();
    body.write(data.subarray(0, 100_000));
    const put = s3Failure(client.send(new PutObjectCommand({ Bucket: name, Key: 'late', Body: body, ContentLength: data.length })));
    // The PUT has found its bucket and is reading the body when the bucket goes, empty.
    await new Promise((resolve) => setTimeout(resolve, 500));
    await client.send(new DeleteBucketCommand({ Bucket: name }));
    await bobS3.send(new CreateBucketCommand({ Bucket: name }));
    body.end(data.subarray(100_000));
    expect(await put).toMatchObject({ code: 'NoSuchBucket', status: 404 });
    expect((await bobS3.send(new ListObjectsV2Command({ Bucket: name }))).KeyCount).toBe(0);
    expect(await api.deps.db.objects.get(name, 'late')).toBeNull();
    expect(await used(carol)).toBe(before);
  });

  test('an object written while DeleteBucket decides waits for it: kept when the bucket stays', async () => {
    const carol = await createUser(api, 'nirvana');
    const client = s3Client(api, carol);
    const name = await newBucket(client, 'marked');
    const mark = Date.now();
    // A delete between its mark and its decision (buckets.ts deleteBucket), which then finds the
    // bucket not empty and takes its mark back.
    expect(await api.deps.db.buckets.markDeleting(name, carol.userId, mark)).toBe(true);
    const started = Date.now();
    const put = client.send(new PutObjectCommand({ Bucket: name, Key: 'k', Body: 'kept' }));
    setTimeout(() => void api.deps.db.buckets.unmarkDeleting(name, mark), 500);
    await put;
    expect(Date.now() - started).toBeGreaterThanOrEqual(450);
    expect(await text(await client.send(new GetObjectCommand({ Bucket: name, Key: 'k' })))).toBe('kept');
  });

  test('Object Lock: a bucket asked for with it is refused; the calls answer as in a bucket made without it', async () => {
    const locked = bucketName('locked');
    expect(await s3Failure(s3.send(new CreateBucketCommand({ Bucket: locked, ObjectLockEnabledForBucket: true })))).toMatchObject({
      code: 'NotImplemented',
      status: 501,
    });
    expect(await api.deps.db.buckets.get(locked)).toBeNull();
    const name = await newBucket(s3, 'nolock');
    await s3.send(new PutObjectCommand({ Bucket: name, Key: 'k', Body: 'v' }));
    const config = { ObjectLockEnabled: 'Enabled' as const, Rule: { DefaultRetention: { Mode: 'GOVERNANCE' as const, Days: 1 } } };
    expect(
      await s3Failure(s3.send(new PutObjectLockConfigurationCommand({ Bucket: name, ObjectLockConfiguration: config }))),
    ).toMatchObject({
      code: 'InvalidBucketState',
      status: 409,
    });
    expect(await s3Failure(s3.send(new GetObjectLockConfigurationCommand({ Bucket: name })))).toMatchObject({
      code: 'ObjectLockConfigurationNotFoundError',
      status: 404,
    });
    expect(await s3Failure(s3.send(new GetObjectRetentionCommand({ Bucket: name, Key: 'k' })))).toMatchObject({
      code: 'InvalidRequest',
      status: 400,
    });
    expect(await s3Failure(s3.send(new PutObjectLegalHoldCommand({ Bucket: name, Key: 'k', LegalHold: { Status: 'ON' } })))).toMatchObject({
      code: 'InvalidRequest',
      status: 400,
    });
    // Another account's bucket stays AccessDenied.
    expect(await s3Failure(bobS3.send(new GetObjectRetentionCommand({ Bucket: name, Key: 'k' })))).toMatchObject({ code: 'AccessDenied' });
  });
});

test('virtual-host style: <bucket>.<S3_DOMAIN> names the bucket', async () => {
  // Every name resolves to loopback here, as a wildcard DNS record would.
  const agent = new http.Agent({
    lookup: ((_host: string, options: { all?: boolean }, callback: (...args: unknown[]) => void) =>
      options.all ? callback(null, [{ address: '127.0.0.1', family: 4 }]) : callback(null, '127.0.0.1', 4)) as never,
  });
  const port = new URL(api.s3Url).port;
  const vhost = s3Client(api, alice, { endpoint: `http://localhost:${port}`, forcePathStyle: false, requestHandler: { httpAgent: agent } });
  const name = await newBucket(s3, 'vhost');
  await vhost.send(new PutObjectCommand({ Bucket: name, Key: 'by/host.txt', Body: 'virtual host' }));
  expect(await text(await s3.send(new GetObjectCommand({ Bucket: name, Key: 'by/host.txt' })))).toBe('virtual host');
  expect((await vhost.send(new ListObjectsV2Command({ Bucket: name }))).Contents!.map((o) => o.Key)).toEqual(['by/host.txt']);
  vhost.destroy();
});

describe('ACLs', () => {
  // Objects here are private: an ACL that grants anyone but the owner is refused in every form,
  // never accepted and ignored (s3cmd's `setacl --acl-public` was told 200 while nothing changed).
  test('only the owner’s grants are taken: canned ACLs, grant headers and policy documents granting more are AccessControlListNotSupported', async () => {
    const name = await newBucket(s3, 'acl');
    await s3.send(new PutObjectCommand({ Bucket: name, Key: 'a.txt', Body: 'a' }));
    const acl = await s3.send(new GetObjectAclCommand({ Bucket: name, Key: 'a.txt' }));
    const ownerId = acl.Owner!.ID!;
    expect(acl.Grants).toEqual([{ Grantee: expect.objectContaining({ ID: ownerId, Type: 'CanonicalUser' }), Permission: 'FULL_CONTROL' }]);
    const refused = { code: 'AccessControlListNotSupported', status: 400 };
    const policy = (grants: object[]) => ({ Owner: acl.Owner, Grants: grants });
    const ownerGrant = { Grantee: { Type: 'CanonicalUser' as const, ID: ownerId }, Permission: 'FULL_CONTROL' as const };
    const allUsers = {
      Grantee: { Type: 'Group' as const, URI: 'http://acs.amazonaws.com/groups/global/AllUsers' },
      Permission: 'READ' as const,
    };
    // The policy GetObjectAcl shows, sent back, is taken; one granting AllUsers or another user is refused.
    await s3.send(new PutObjectAclCommand({ Bucket: name, Key: 'a.txt', AccessControlPolicy: policy([ownerGrant]) }));
    expect(
      await s3Failure(
        s3.send(new PutObjectAclCommand({ Bucket: name, Key: 'a.txt', AccessControlPolicy: policy([ownerGrant, allUsers]) })),
      ),
    ).toMatchObject(refused);
    const stranger = { Grantee: { Type: 'CanonicalUser' as const, ID: 'usr_someoneElse00000' }, Permission: 'READ' as const };
    expect(
      await s3Failure(s3.send(new PutObjectAclCommand({ Bucket: name, Key: 'a.txt', AccessControlPolicy: policy([stranger]) }))),
    ).toMatchObject(refused);
    expect(await s3Failure(s3.send(new PutObjectAclCommand({ Bucket: name, Key: 'a.txt', ACL: 'public-read' })))).toMatchObject(refused);
    expect(
      await s3Failure(
        s3.send(
          new PutObjectAclCommand({ Bucket: name, Key: 'a.txt', GrantRead: 'uri="http://acs.amazonaws.com/groups/global/AllUsers"' }),
        ),
      ),
    ).toMatchObject(refused);
    expect((await s3.send(new GetObjectAclCommand({ Bucket: name, Key: 'a.txt' }))).Grants).toHaveLength(1);
    expect((await fetch(`${api.s3Url}/${name}/a.txt`)).status).toBe(403);
    // Grant headers on a PutObject: the owner alone is taken, anyone else refuses the write.
    await s3.send(new PutObjectCommand({ Bucket: name, Key: 'mine.txt', Body: 'm', GrantFullControl: `id="${ownerId}"` }));
    expect(
      await s3Failure(
        s3.send(
          new PutObjectCommand({ Bucket: name, Key: 'shared.txt', Body: 's', GrantRead: `id="${ownerId}", id="usr_someoneElse00000"` }),
        ),
      ),
    ).toMatchObject(refused);
    expect(await s3Failure(s3.send(new HeadObjectCommand({ Bucket: name, Key: 'shared.txt' })))).toMatchObject({ status: 404 });
    // A bucket asked for public-read is not made private instead (S3's code with ACLs disabled).
    const publicName = bucketName('acl-public');
    expect(await s3Failure(s3.send(new CreateBucketCommand({ Bucket: publicName, ACL: 'public-read' })))).toMatchObject({
      code: 'InvalidBucketAclWithObjectOwnership',
      status: 400,
    });
    expect(await s3Failure(s3.send(new HeadBucketCommand({ Bucket: publicName })))).toMatchObject({ status: 404 });
  });
});

describe('credentials', () => {
  test('a wrong secret is SignatureDoesNotMatch, an unknown key InvalidAccessKeyId, a deleted key too', async () => {
    const forged = s3Client(api, { ...alice, apiKey: `${alice.apiKey.slice(0, -1)}${alice.apiKey.endsWith('x') ? 'y' : 'x'}` });
    expect(await s3Failure(forged.send(new ListBucketsCommand({})))).toMatchObject({ code: 'SignatureDoesNotMatch', status: 403 });
    const unknown = s3Client(api, { ...alice, keyPrefix: 'stp_AAAAAAAA' });
    expect(await s3Failure(unknown.send(new ListBucketsCommand({})))).toMatchObject({ code: 'InvalidAccessKeyId', status: 403 });
    const carol = await createUser(api);
    const second = await call(api, 'POST', '/apikeys', { key: carol.apiKey, body: { name: 'second' } });
    const temporary = { ...carol, apiKey: second.body.apiKey, keyPrefix: second.body.keyPrefix };
    const client = s3Client(api, temporary);
    await client.send(new ListBucketsCommand({}));
    expect((await call(api, 'DELETE', `/apikeys/${temporary.keyPrefix}`, { key: carol.apiKey })).status).toBeLessThan(300);
    expect(await s3Failure(client.send(new ListBucketsCommand({})))).toMatchObject({ code: 'InvalidAccessKeyId', status: 403 });
    const skewed = s3Client(api, alice, { systemClockOffset: -3600_000 });
    expect(await s3Failure(skewed.send(new ListBucketsCommand({})))).toMatchObject({ code: 'RequestTimeTooSkewed', status: 403 });
  });

  test('every error is S3’s XML document; unknown methods too', async () => {
    const res = await fetch(`${api.s3Url}/`, { method: 'PATCH' });
    expect(res.status).toBe(405);
    const body = await res.text();
    expect(res.headers.get('content-type')).toBe('application/xml');
    expect(body).toMatch(/<Error><Code>MethodNotAllowed<\/Code><Message>[^<]+<\/Message>.*<RequestId>[0-9A-F]+<\/RequestId><\/Error>/s);
    const anonymous = await fetch(`${api.s3Url}/`);
    expect(anonymous.status).toBe(403);
    expect(await anonymous.text()).toContain('<Code>AccessDenied</Code>');
  });
});
