// S3 conditional writes with the AWS SDK for JavaScript v3: If-Match and If-None-Match on
// PutObject, CompleteMultipartUpload, DeleteObject(s), and racing writes on one key, of which
// exactly those the key allowed win.
import {
  CompleteMultipartUploadCommand,
  CopyObjectCommand,
  CreateMultipartUploadCommand,
  DeleteObjectCommand,
  DeleteObjectsCommand,
  GetObjectCommand,
  HeadObjectCommand,
  ListPartsCommand,
  PutObjectCommand,
  UploadPartCommand,
} from '@aws-sdk/client-s3';
import { s3Failure } from './support/s3.js';
import { alice, api, md5, newBucket, s3, text, useS3Accounts } from './support/s3-accounts.js';

useS3Accounts();

describe('conditional writes', () => {
  test('conditional writes: If-Match and If-None-Match on PutObject, CompleteMultipartUpload, DeleteObject(s)', async () => {
    const b = await newBucket(s3, 'cond');
    const put = (extra: { IfMatch?: string; IfNoneMatch?: string }, body = 'v') =>
      s3.send(new PutObjectCommand({ Bucket: b, Key: 'k', Body: body, ...extra }));
    // No object yet: If-Match is NoSuchKey, If-None-Match * writes.
    expect(await s3Failure(put({ IfMatch: '*' }))).toMatchObject({ code: 'NoSuchKey', status: 404 });
    const first = (await put({ IfNoneMatch: '*' }, 'one')).ETag!;
    expect(await s3Failure(put({ IfNoneMatch: '*' }))).toMatchObject({ code: 'PreconditionFailed', status: 412 });
    expect(await s3Failure(put({ IfNoneMatch: first }))).toMatchObject({ code: 'PreconditionFailed' });
    expect(await s3Failure(put({ IfMatch: '"0123"' }))).toMatchObject({ code: 'PreconditionFailed' });
    expect(await text(await s3.send(new GetObjectCommand({ Bucket: b, Key: 'k' })))).toBe('one'); // nothing written
    const second = (await put({ IfMatch: first }, 'two')).ETag!;
    // A multipart completion under the same conditions, checked when it completes.
    const { UploadId } = await s3.send(new CreateMultipartUploadCommand({ Bucket: b, Key: 'k' }));
    const { ETag } = await s3.send(new UploadPartCommand({ Bucket: b, Key: 'k', UploadId, PartNumber: 1, Body: 'three' }));
    const complete = (extra: { IfMatch?: string; IfNoneMatch?: string }) =>
      s3.send(
        new CompleteMultipartUploadCommand({
          Bucket: b,
          Key: 'k',
          UploadId,
          MultipartUpload: { Parts: [{ PartNumber: 1, ETag }] },
          ...extra,
        }),
      );
    expect(await s3Failure(complete({ IfMatch: first }))).toMatchObject({ code: 'PreconditionFailed', status: 412 });
    await complete({ IfMatch: second });
    expect(await text(await s3.send(new GetObjectCommand({ Bucket: b, Key: 'k' })))).toBe('three');
    // Deletes: another ETag is refused; no object, nothing to refuse.
    expect(await s3Failure(s3.send(new DeleteObjectCommand({ Bucket: b, Key: 'k', IfMatch: first })))).toMatchObject({
      code: 'PreconditionFailed',
    });
    const refused = await s3.send(new DeleteObjectsCommand({ Bucket: b, Delete: { Objects: [{ Key: 'k', ETag: first }] } }));
    expect(refused.Errors!.map((e) => [e.Key, e.Code])).toEqual([['k', 'PreconditionFailed']]);
    const current = (await s3.send(new HeadObjectCommand({ Bucket: b, Key: 'k' }))).ETag!;
    await s3.send(new DeleteObjectCommand({ Bucket: b, Key: 'k', IfMatch: current }));
    expect(await s3Failure(s3.send(new HeadObjectCommand({ Bucket: b, Key: 'k' })))).toMatchObject({ status: 404 });
    await s3.send(new DeleteObjectCommand({ Bucket: b, Key: 'k', IfMatch: first }));
    const none = await s3.send(new DeleteObjectsCommand({ Bucket: b, Delete: { Objects: [{ Key: 'k', ETag: first }] } }));
    expect(none.Errors ?? []).toEqual([]);
  });

  test('conditional writes are atomic: of racing writes on one key, exactly those the key allowed win', async () => {
    const b = await newBucket(s3, 'race');
    // The ETag of a write that won, the error's code of one that lost.
    const status = (p: Promise<{ ETag?: string }>) =>
      p.then(
        (r) => r.ETag!,
        (err: { Code?: string; name: string }) => err.Code ?? err.name,
      );
    const put = (body: string, extra: { IfMatch?: string; IfNoneMatch?: string }) =>
      status(s3.send(new PutObjectCommand({ Bucket: b, Key: 'k', Body: body, ...extra })));
    // 12 creates of a key that has no object: one writes, every other finds it there.
    const creates = await Promise.all(Array.from({ length: 12 }, (_, i) => put(`create ${i}`, { IfNoneMatch: '*' })));
    const created = creates.filter((r) => r !== 'PreconditionFailed');
    expect([created.length, creates.length - created.length]).toEqual([1, 11]);
    const winner = creates.indexOf(created[0]!);
    expect(await text(await s3.send(new GetObjectCommand({ Bucket: b, Key: 'k' })))).toBe(`create ${winner}`);
    // 12 updates that each require that object: one replaces it, the others see another ETag.
    const updates = await Promise.all(Array.from({ length: 12 }, (_, i) => put(`update ${i}`, { IfMatch: created[0]! })));
    const updated = updates.filter((r) => r !== 'PreconditionFailed');
    expect(updated).toHaveLength(1);
    expect(await text(await s3.send(new GetObjectCommand({ Bucket: b, Key: 'k' })))).toBe(`update ${updates.indexOf(updated[0]!)}`);
    // A copy onto the key under If-None-Match * is refused too, and a conditional delete of an old ETag.
    await s3.send(new PutObjectCommand({ Bucket: b, Key: 'src', Body: 'source' }));
    expect(
      await s3Failure(s3.send(new CopyObjectCommand({ Bucket: b, Key: 'k', CopySource: `${b}/src`, IfNoneMatch: '*' }))),
    ).toMatchObject({
      code: 'PreconditionFailed',
      status: 412,
    });
    const copied = await s3.send(new CopyObjectCommand({ Bucket: b, Key: 'k', CopySource: `${b}/src`, IfMatch: updated[0]! }));
    expect(copied.CopyObjectResult?.ETag).toBe(`"${md5('source')}"`);
    expect(await s3Failure(s3.send(new DeleteObjectCommand({ Bucket: b, Key: 'k', IfMatch: updated[0]! })))).toMatchObject({
      code: 'PreconditionFailed',
    });
    // The size and time a delete may name (x-amz-if-match-size, x-amz-if-match-last-modified-time).
    const head = await s3.send(new HeadObjectCommand({ Bucket: b, Key: 'k' }));
    const del = (extra: { IfMatchSize?: number; IfMatchLastModifiedTime?: Date }) =>
      s3.send(new DeleteObjectCommand({ Bucket: b, Key: 'k', ...extra }));
    expect(await s3Failure(del({ IfMatchSize: 9999 }))).toMatchObject({ code: 'PreconditionFailed', status: 412 });
    expect(await s3Failure(del({ IfMatchLastModifiedTime: new Date(2015, 0, 1) }))).toMatchObject({ code: 'PreconditionFailed' });
    const many = await s3.send(new DeleteObjectsCommand({ Bucket: b, Delete: { Objects: [{ Key: 'k', Size: 9999 }] } }));
    expect(many.Errors!.map((e) => e.Code)).toEqual(['PreconditionFailed']);
    await del({ IfMatchSize: head.ContentLength!, IfMatchLastModifiedTime: head.LastModified! });
    expect(await s3Failure(s3.send(new HeadObjectCommand({ Bucket: b, Key: 'k' })))).toMatchObject({ status: 404 });
    await del({ IfMatchSize: 9999 }); // no object: nothing to refuse
    // Two multipart uploads of one new key completed at once under If-None-Match: *: both pass
    // the check when asked, one object is recorded, and the other upload is open again, its
    // parts kept: completing it without the condition replaces the object.
    const uploads = await Promise.all(
      ['first', 'second'].map(async (body) => {
        const { UploadId } = await s3.send(new CreateMultipartUploadCommand({ Bucket: b, Key: 'mpu' }));
        const { ETag } = await s3.send(new UploadPartCommand({ Bucket: b, Key: 'mpu', UploadId, PartNumber: 1, Body: body }));
        return { UploadId, MultipartUpload: { Parts: [{ PartNumber: 1, ETag }] } };
      }),
    );
    const completions = await Promise.all(
      uploads.map((u) => status(s3.send(new CompleteMultipartUploadCommand({ Bucket: b, Key: 'mpu', IfNoneMatch: '*', ...u })))),
    );
    expect(completions.filter((c) => c === 'PreconditionFailed')).toHaveLength(1);
    const loser = uploads[completions.indexOf('PreconditionFailed')]!;
    const bodies = ['first', 'second'];
    expect(await text(await s3.send(new GetObjectCommand({ Bucket: b, Key: 'mpu' })))).toBe(
      bodies[1 - completions.indexOf('PreconditionFailed')],
    );
    expect(
      (await s3.send(new ListPartsCommand({ Bucket: b, Key: 'mpu', UploadId: loser.UploadId }))).Parts!.map((p) => p.PartNumber),
    ).toEqual([1]);
    await s3.send(new CompleteMultipartUploadCommand({ Bucket: b, Key: 'mpu', ...loser }));
    expect(await text(await s3.send(new GetObjectCommand({ Bucket: b, Key: 'mpu' })))).toBe(
      bodies[completions.indexOf('PreconditionFailed')],
    );
    // Every refused write gave back what it reserved: the counters equal a recount of the records.
    const compared = await api.deps.db.usage.compare(alice.userId);
    expect(compared?.stored).toEqual(compared?.fromRecords);
  });
});
