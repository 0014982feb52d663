#pragma once
// Object storage over the S3 API, signed with AWS Signature Version 4: path-style for
// MinIO, AIStor, Ceph and s3rver (an explicit endpoint), virtual-hosted for AWS and for
// Aliyun OSS's S3-compatible API (the bucket in the host name). Over http:// or https://.
//
// Reference: AWS, "Authenticating Requests (AWS Signature Version 4)" — header
// signing and query-string (presigned URL) signing; the known answers in
// tests/sidecar/s3_test.cpp are the documentation's own examples.

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace dockgate::sidecar {

struct s3_config {
  std::string endpoint;  // scheme://host[:port], no path
  std::string region = "us-east-1";
  std::string bucket;
  std::string access_key;
  std::string secret_key;
  bool virtual_hosted = false;  // bucket.host/key instead of host/bucket/key
  int max_attempts = 3;         // SANDBOX_S3_MAX_ATTEMPTS: transport errors and 5xx are retried
  std::chrono::seconds timeout{120};
};

struct s3_result {
  unsigned status = 0;  // 0: transport error (see error)
  std::string body;
  std::string error;
  std::string etag;           // of the object read, written or probed (quotes removed)
  std::string last_modified;  // HTTP date, as the server sent it
  std::string date;           // the server's Date field: its clock when it answered
  bool ok() const { return status >= 200 && status < 300; }
  // One line for logs and error answers: status and the S3 error code, or the transport error.
  std::string describe() const;
};

struct s3_object {
  std::string key;
  std::uint64_t size = 0;
  std::int64_t last_modified = 0;  // Unix seconds; 0 when the listing did not say
};

// SigV4 pieces, exposed for the known-answer tests.
std::string sha256_hex(std::string_view data);
// S3's URI encoding: unreserved characters kept, '/' kept when `keep_slash`.
std::string s3_uri_encode(std::string_view text, bool keep_slash = true);
struct sigv4_request {
  std::string_view method;
  std::string canonical_uri;    // already encoded
  std::string canonical_query;  // already encoded and sorted
  std::vector<std::pair<std::string, std::string>>
      headers;               // lower-case names, sorted, host included
  std::string payload_hash;  // hex SHA-256 or UNSIGNED-PAYLOAD
};
// The hex signature of a request at `amz_date` (YYYYMMDDTHHMMSSZ).
std::string sigv4_signature(const sigv4_request& r, std::string_view amz_date,
                            std::string_view region, std::string_view secret_key);
std::string sigv4_scope(std::string_view amz_date, std::string_view region);
// The Authorization header value of a header-signed request (x-amz-content-sha256 and
// x-amz-date among the signed headers).
std::string sigv4_authorization(std::string_view method, std::string_view canonical_uri,
                                std::string_view host, std::string_view payload_sha256,
                                std::string_view amz_date, const s3_config& c);
// "20130524T000000Z" for a point in time.
std::string amz_date(std::int64_t unix_seconds);
// RFC 3339 / ISO 8601 (ListObjectsV2) or RFC 7231 (Last-Modified) as Unix seconds; 0 if unreadable.
std::int64_t parse_s3_time(std::string_view text);

class s3_client {
 public:
  explicit s3_client(s3_config c) : config_(std::move(c)) {}
  const s3_config& config() const { return config_; }

  // `if_match`: the ETag the object must still have ("" — it must not exist yet); a
  // store that supports conditional writes (AWS since 2024, MinIO, AIStor) answers 412
  // otherwise, one that does not ignores it. nullptr: unconditional.
  s3_result put_object(std::string_view key, std::string_view data, std::string_view content_type,
                       const std::string* if_match = nullptr);
  s3_result get_object(std::string_view key, std::size_t max_bytes);
  s3_result head_object(std::string_view key);
  s3_result delete_object(std::string_view key);
  // Server-side copy within the bucket (CopyObject).
  s3_result copy_object(std::string_view from_key, std::string_view to_key);
  // Every object under `prefix` (ListObjectsV2, following continuation tokens).
  s3_result list_objects(std::string_view prefix, std::vector<s3_object>& out,
                         std::size_t max_objects = 1000000);
  // A presigned GET URL valid for `expires_in` seconds from `now`.
  std::string presign_get(std::string_view key, std::int64_t expires_in, std::int64_t now) const;

  // Where requests go: the URL's scheme://host[:port] (the bucket in the host when virtual-hosted).
  std::optional<std::string> base_url(std::string* error) const;

 private:
  s3_result request(std::string_view method, std::string_view key, std::string_view query,
                    std::vector<std::pair<std::string, std::string>> extra_signed,
                    std::string_view body, std::string_view content_type, std::size_t max_bytes);
  s3_result attempt(std::string_view method, std::string_view key, std::string_view query,
                    const std::vector<std::pair<std::string, std::string>>& extra_signed,
                    std::string_view body, std::string_view content_type, std::size_t max_bytes);
  s3_config config_;
};

// Checks an endpoint URL as the storage block gives it: http(s)://host[:port], nothing after.
std::optional<std::string> s3_endpoint_problem(std::string_view endpoint);

}  // namespace dockgate::sidecar
