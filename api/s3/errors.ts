// The S3 surface's errors: S3's own codes, statuses and messages, so SDKs recognise them
// (retry SlowDown, correct their clock on RequestTimeTooSkewed, name exceptions by Code).
//
//   new S3Error(code, message?, fields?, headers?, options?)
//                                          status from the code; message S3's unless given;
//                                          fields are extra elements of the error document
//                                          (BucketName, Key, UploadId, HeadersNotSigned, …);
//                                          headers go on the answer (Content-Range of a 416)
//   asS3Error(err): S3Error                anything else becomes InternalError (its text is
//                                          not shown to the client; it stays the cause)
//   (the error document of an S3Error is xml.ts's errorXml)
//
// Two codes are ours, as S3 has none for them: QuotaExceeded (403, as Ceph RGW answers a full
// quota: a final refusal, which SDKs do not retry) for the account's storage quota, and the
// request rate uses S3's own SlowDown (503), which every SDK retries with backoff (a 429 is
// also retried by the JS SDK, but not by every client).

const CODES = {
  AccessDenied: [403, 'Access Denied'],
  InvalidAccessKeyId: [403, 'The AWS Access Key Id you provided does not exist in our records.'],
  SignatureDoesNotMatch: [
    403,
    'The request signature we calculated does not match the signature you provided. Check your key and signing method.',
  ],
  RequestTimeTooSkewed: [403, 'The difference between the request time and the current time is too large.'],
  QuotaExceeded: [403, 'The storage quota of this account is exceeded.'],
  AuthorizationHeaderMalformed: [400, 'The authorization header is malformed.'],
  AuthorizationQueryParametersError: [400, 'The query-string authentication parameters are malformed.'],
  InvalidToken: [400, 'The provided token is malformed or otherwise invalid.'],
  BadDigest: [400, 'The Content-MD5 you specified did not match what we received.'],
  InvalidDigest: [400, 'The Content-MD5 you specified is not valid.'],
  XAmzContentSHA256Mismatch: [400, "The provided 'x-amz-content-sha256' header does not match what was computed."],
  IncompleteBody: [400, 'You did not provide the number of bytes specified by the Content-Length HTTP header.'],
  InvalidRequest: [400, 'Invalid Request'],
  InvalidURI: [400, 'Couldn’t parse the specified URI.'],
  InvalidArgument: [400, 'Invalid Argument'],
  MalformedXML: [400, 'The XML you provided was not well-formed or did not validate against our published schema.'],
  MalformedACLError: [400, 'The XML you provided was not well-formed or did not validate against our published schema.'],
  EntityTooLarge: [400, 'Your proposed upload exceeds the maximum allowed object size.'],
  EntityTooSmall: [400, 'Your proposed upload is smaller than the minimum allowed object size.'],
  InvalidBucketName: [400, 'The specified bucket is not valid.'],
  KeyTooLongError: [400, 'Your key is too long.'],
  MetadataTooLarge: [400, 'Your metadata headers exceed the maximum allowed metadata size.'],
  TooManyBuckets: [400, 'You have attempted to create more buckets than allowed.'],
  AccessControlListNotSupported: [400, 'The bucket does not allow ACLs.'],
  InvalidBucketAclWithObjectOwnership: [400, "Bucket cannot have ACLs set with ObjectOwnership's BucketOwnerEnforced setting"],
  MissingRequestBodyError: [400, 'Request Body is empty.'],
  RequestTimeout: [400, 'Your socket connection to the server was not read from or written to within the timeout period.'],
  InvalidPart: [
    400,
    "One or more of the specified parts could not be found. The part may not have been uploaded, or the specified entity tag may not match the part's entity tag.",
  ],
  InvalidPartOrder: [400, 'The list of parts was not in ascending order. The parts list must be specified in order by part number.'],
  NoSuchBucket: [404, 'The specified bucket does not exist'],
  NoSuchKey: [404, 'The specified key does not exist.'],
  NoSuchUpload: [
    404,
    'The specified upload does not exist. The upload ID may be invalid, or the upload may have been aborted or completed.',
  ],
  NoSuchVersion: [404, 'The specified version does not exist.'],
  NoSuchCORSConfiguration: [404, 'The CORS configuration does not exist'],
  // What S3 answers for a bucket configuration that is not set (none ever is here).
  NoSuchBucketPolicy: [404, 'The bucket policy does not exist'],
  NoSuchLifecycleConfiguration: [404, 'The lifecycle configuration does not exist'],
  NoSuchTagSet: [404, 'The TagSet does not exist'],
  ServerSideEncryptionConfigurationNotFoundError: [404, 'The server side encryption configuration was not found'],
  NoSuchWebsiteConfiguration: [404, 'The specified bucket does not have a website configuration'],
  ReplicationConfigurationNotFoundError: [404, 'The replication configuration was not found'],
  OwnershipControlsNotFoundError: [404, 'The bucket ownership controls were not found'],
  NoSuchPublicAccessBlockConfiguration: [404, 'The public access block configuration was not found'],
  ObjectLockConfigurationNotFoundError: [404, 'Object Lock configuration does not exist for this bucket'],
  MethodNotAllowed: [405, 'The specified method is not allowed against this resource.'],
  BucketAlreadyExists: [409, 'The requested bucket name is not available. Please select a different name and try again.'],
  BucketAlreadyOwnedByYou: [409, 'Your previous request to create the named bucket succeeded and you already own it.'],
  BucketNotEmpty: [409, 'The bucket you tried to delete is not empty'],
  InvalidBucketState: [409, 'The request is not valid with the current state of the bucket.'],
  OperationAborted: [409, 'A conflicting conditional operation is currently in progress against this resource. Try again.'],
  MissingContentLength: [411, 'You must provide the Content-Length HTTP header.'],
  PreconditionFailed: [412, 'At least one of the pre-conditions you specified did not hold'],
  InvalidRange: [416, 'The requested range is not satisfiable'],
  InternalError: [500, 'We encountered an internal error. Please try again.'],
  NotImplemented: [501, 'A header you provided implies functionality that is not implemented'],
  SlowDown: [503, 'Please reduce your request rate.'],
  ServiceUnavailable: [503, 'Service is unable to handle request.'],
} as const satisfies Record<string, readonly [number, string]>;

export type S3ErrorCode = keyof typeof CODES;

export class S3Error extends Error {
  readonly status: number;

  constructor(
    readonly code: S3ErrorCode,
    message?: string,
    readonly fields: Record<string, string> = {},
    readonly headers: Record<string, string> = {},
    options?: { cause?: unknown },
  ) {
    super(message ?? CODES[code][1], options);
    this.name = 'S3Error';
    this.status = CODES[code][0];
  }
}

export function asS3Error(err: unknown): S3Error {
  return err instanceof S3Error ? err : new S3Error('InternalError', undefined, {}, {}, { cause: err });
}
