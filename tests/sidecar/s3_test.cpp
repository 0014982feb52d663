#include "storage/s3.hpp"

#include <catch2/catch.hpp>

using namespace dockgate::sidecar;

TEST_CASE("SigV4 signs as an independent implementation does", "[s3]") {
  // Known answer computed with Python's hmac/hashlib from the same canonical request.
  s3_config c;
  c.access_key = "S3RVER";
  c.secret_key = "S3RVER";
  c.region = "us-east-1";
  const std::string payload = sha256_hex("hello");
  CHECK(payload == "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824");
  CHECK(sigv4_authorization("PUT", "/dockgate-test/tenant-a/workspaces/k.tgz", "127.0.0.1:9000",
                            payload, "20261129T120000Z", c) ==
        "AWS4-HMAC-SHA256 Credential=S3RVER/20261129/us-east-1/s3/aws4_request, "
        "SignedHeaders=host;x-amz-content-sha256;x-amz-date, "
        "Signature=eb4676ae274b4547d872cf42bbd467426698b8fe7a394f4ccf30ac49bda2883a");
  CHECK(s3_uri_encode("a b/c+d~e") == "a%20b/c%2Bd~e");
}

namespace {
// The example account of AWS's SigV4 documentation.
s3_config aws_example() {
  s3_config c;
  c.endpoint = "https://s3.amazonaws.com";
  c.bucket = "examplebucket";
  c.virtual_hosted = true;
  c.region = "us-east-1";
  c.access_key = "AKIAIOSFODNN7EXAMPLE";
  c.secret_key = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY";
  return c;
}
const std::string empty_sha = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";
}  // namespace

TEST_CASE("SigV4 header signing: AWS's published examples", "[s3]") {
  // "Signature Calculations for the Authorization Header": GET Object with a Range.
  sigv4_request get{"GET",
                    "/test.txt",
                    "",
                    {{"host", "examplebucket.s3.amazonaws.com"},
                     {"range", "bytes=0-9"},
                     {"x-amz-content-sha256", empty_sha},
                     {"x-amz-date", "20130524T000000Z"}},
                    empty_sha};
  CHECK(sigv4_signature(get, "20130524T000000Z", "us-east-1", aws_example().secret_key) ==
        "f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41");
  // GET Bucket (list objects) with a sorted query.
  sigv4_request list{"GET",
                     "/",
                     "max-keys=2&prefix=J",
                     {{"host", "examplebucket.s3.amazonaws.com"},
                      {"x-amz-content-sha256", empty_sha},
                      {"x-amz-date", "20130524T000000Z"}},
                     empty_sha};
  CHECK(sigv4_signature(list, "20130524T000000Z", "us-east-1", aws_example().secret_key) ==
        "34b48302e7b5fa45bde8084f4b7868a86f0a534bc59db6670ed5711ef69dc6f7");
  CHECK(amz_date(1369353600) == "20130524T000000Z");
}

TEST_CASE("SigV4 query signing: AWS's presigned URL example", "[s3]") {
  // "Authenticating Requests: Using Query Parameters": GET examplebucket/test.txt, 86400 s.
  CHECK(s3_client(aws_example()).presign_get("test.txt", 86400, 1369353600) ==
        "https://examplebucket.s3.amazonaws.com/test.txt?X-Amz-Algorithm=AWS4-HMAC-SHA256"
        "&X-Amz-Credential=AKIAIOSFODNN7EXAMPLE%2F20130524%2Fus-east-1%2Fs3%2Faws4_request"
        "&X-Amz-Date=20130524T000000Z&X-Amz-Expires=86400&X-Amz-SignedHeaders=host"
        "&X-Amz-Signature=aeeed9bbccd4d02ee5c0109b86d86835f995330da4c265957d157751f604d404");
  // Path-style (an explicit endpoint): the bucket is part of the signed path.
  s3_config minio = aws_example();
  minio.endpoint = "http://127.0.0.1:9000";
  minio.virtual_hosted = false;
  CHECK(s3_client(minio)
            .presign_get("a b/c.tgz", 60, 1369353600)
            .starts_with("http://127.0.0.1:9000/examplebucket/a%20b/c.tgz?"));
}

TEST_CASE("S3 times and endpoints", "[s3]") {
  CHECK(parse_s3_time("2013-05-24T00:00:00.000Z") == 1369353600);
  CHECK(parse_s3_time("Fri, 24 May 2013 00:00:00 GMT") == 1369353600);
  CHECK(parse_s3_time("yesterday") == 0);
  CHECK_FALSE(s3_endpoint_problem("https://minio.internal:9000"));
  CHECK_FALSE(s3_endpoint_problem("http://127.0.0.1:9000/"));
  CHECK(s3_endpoint_problem("ftp://x"));
  CHECK(s3_endpoint_problem("http://host/path"));
  CHECK(s3_endpoint_problem("http://user@host"));
  CHECK(s3_endpoint_problem("http://"));
}
