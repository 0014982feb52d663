#!/usr/bin/env node
// s3rver 3.7.1 with S3's conditional writes, for the tests of the sidecar's lease and
// session records. s3rver honours If-None-Match only on GET; AWS S3 (since 2024), MinIO
// and AIStor also honour it, and If-Match, on PUT Object: a create-only PUT
// (If-None-Match: *) of a key that exists, or a replace (If-Match: "<etag>") of one whose
// ETag has changed, answers 412 PreconditionFailed; If-Match on a missing key answers
// 404 NoSuchKey. This script starts s3rver as its CLI would and adds that check in a
// middleware of its own, just before s3rver's router.
//
// Atomic like the real thing: every PUT Object (CopyObject included) and DELETE Object of
// one key waits for the previous one to finish, so a check and the write it allows are
// never interleaved with another write of that key. Not covered: DeleteObjects (POST
// ?delete) and CompleteMultipartUpload, which write keys named in their bodies, and
// conditions on DELETE; the sidecar sends none of these.
//
//   node s3rver-conditional.js DIR ADDRESS PORT BUCKET   (s3rver from NODE_PATH)
'use strict';

const S3rver = require('s3rver');
const S3Error = require('s3rver/lib/models/error');
const bucketCtrl = require('s3rver/lib/controllers/bucket');
const objectCtrl = require('s3rver/lib/controllers/object');

const [directory, address, port, bucket] = process.argv.slice(2);
if (!directory || !address || !port || !bucket) {
  console.error('usage: s3rver-conditional.js DIR ADDRESS PORT BUCKET');
  process.exit(2);
}

// The key of a request on an object, as s3rver's router will see it ('/:bucket/:key+',
// after its vhost middleware has moved a virtual-hosted bucket into the path), or null.
// Subresource requests (?tagging, ?uploadId, ?acl, ...: the router's list) are not
// PUT/DELETE Object; other parameters (a presigned URL's X-Amz-*) leave it one.
const SUBRESOURCES = new Set([...bucketCtrl.METHODS, ...objectCtrl.METHODS]);
function objectOf(ctx) {
  if (ctx.method !== 'PUT' && ctx.method !== 'DELETE') return null;
  if (Object.keys(ctx.query).some(name => SUBRESOURCES.has(name))) return null;
  const m = /^\/([^/]+)\/(.+)$/.exec(ctx.path);
  if (!m) return null;
  try {
    return { bucket: decodeURIComponent(m[1]), key: decodeURIComponent(m[2]) };
  } catch (err) {
    return null;  // s3rver's router answers the malformed path
  }
}

// ETag lists as RFC 9110 writes them: "a", W/"b", or bare (compared without quotes).
function etagList(header) {
  return header.split(',').map(t => t.trim().replace(/^W\//, '').replace(/^"(.*)"$/, '$1'));
}

function preconditionFailed(condition) {
  return new S3Error('PreconditionFailed', 'At least one of the pre-conditions you specified did not hold', {
    Condition: condition,
  });
}

// Throws S3's answer when a condition of a PUT does not hold.
async function checkPut(ctx, { bucket, key }) {
  const ifMatch = ctx.get('if-match');
  const ifNoneMatch = ctx.get('if-none-match');
  if (!ifMatch && !ifNoneMatch) return;
  // A missing bucket: s3rver's own NoSuchBucket answer, not ours.
  if (!(await ctx.store.getBucket(bucket))) return;
  // getObject is the store call s3rver's GET Object makes; its metadata.etag is
  // JSON.stringify(md5), the quoted form s3rver's PUT answers in its ETag header.
  const object = await ctx.store.getObject(bucket, key);
  if (object && object.content) object.content.destroy();
  const etag = object ? object.metadata.etag.replace(/^"(.*)"$/, '$1') : null;
  if (ifMatch) {
    if (etag === null) throw new S3Error('NoSuchKey', 'The specified key does not exist.', { Key: key });
    const wanted = etagList(ifMatch);
    if (!wanted.includes('*') && !wanted.includes(etag)) throw preconditionFailed('If-Match');
  }
  if (ifNoneMatch) {
    // AWS accepts only '*' here (create only if absent).
    if (ifNoneMatch.trim() !== '*') {
      throw new S3Error('NotImplemented', 'A header you provided implies functionality that is not implemented', {
        Header: 'If-None-Match',
      });
    }
    if (etag !== null) throw preconditionFailed('If-None-Match');
  }
}

// One promise chain per "bucket/key": the tail of the last write queued for it.
const tails = new Map();
function serialise(name, job) {
  const run = (tails.get(name) || Promise.resolve()).then(job);
  const tail = run.catch(() => {});
  tails.set(name, tail);
  tail.then(() => {
    if (tails.get(name) === tail) tails.delete(name);
  });
  return run;
}

function conditionalWrites() {
  return async function conditionalWrites(ctx, next) {
    const target = objectOf(ctx);
    if (!target) return next();
    return serialise(`${target.bucket}/${target.key}`, async () => {
      if (ctx.method === 'PUT') await checkPut(ctx, target);
      await next();
    });
  };
}

const app = new S3rver({
  directory,
  address,
  port: Number(port),
  silent: true,
  // Virtual-hosted requests to <bucket>.s3.oss-<region>.aliyuncs.com (see s3rver.sh).
  serviceEndpoint: 'aliyuncs.com',
  configureBuckets: [{ name: bucket, configs: [] }],
});

// Just before the router (the layer @koa/router marks with .router): after s3rver's
// logger, its XML encoder and its vhost rewrite, so the check sees a virtual-hosted
// bucket in the path and its answers are logged like s3rver's own. It runs before the
// router's authentication: a 412 does not prove the request was signed (a test store).
const routerAt = app.middleware.findIndex(fn => fn.router);
if (routerAt < 0) {
  console.error('s3rver-conditional.js: no router among s3rver\'s middleware (not s3rver 3.7.1?)');
  process.exit(1);
}
app.middleware.splice(routerAt, 0, conditionalWrites());

app.run().then(
  ({ address: a, port: p }) => console.log('s3rver-conditional.js: listening on %s:%d', a, p),
  err => {
    console.error(err);
    process.exit(1);
  },
);
