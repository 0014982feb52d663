#pragma once
// Workspace archives in S3-compatible object storage: path-style requests signed with
// AWS Signature Version 4 (what MinIO, Ceph and s3rver speak), over http:// or https://.

#include <chrono>
#include <optional>
#include <string>
#include <string_view>

namespace dockgate::sidecar {

struct s3_config {
  std::string endpoint;  // http://host:port or https://host[:port]
  std::string region = "us-east-1";
  std::string bucket;
  std::string access_key;
  std::string secret_key;
};

struct s3_result {
  unsigned status = 0;  // 0: transport error
  std::string body;
  std::string error;
};

// The SigV4 Authorization header value for a request (exposed for tests against the
// AWS documentation's example).
std::string sigv4_authorization(std::string_view method, std::string_view canonical_uri, std::string_view host,
                                std::string_view payload_sha256, std::string_view amz_date, const s3_config& c);
std::string sha256_hex(std::string_view data);
// S3's URI encoding of an object key ('/' kept).
std::string s3_uri_encode(std::string_view key);

class s3_client {
 public:
  explicit s3_client(s3_config c) : config_(std::move(c)) {}
  s3_result put_object(std::string_view key, std::string_view data, std::string_view content_type,
                       std::chrono::seconds timeout);
  s3_result get_object(std::string_view key, std::size_t max_bytes, std::chrono::seconds timeout);
  s3_result delete_object(std::string_view key, std::chrono::seconds timeout);

 private:
  s3_result request(std::string_view method, std::string_view key, std::string_view body,
                    std::string_view content_type, std::size_t max_bytes, std::chrono::seconds timeout);
  s3_config config_;
};

}  // namespace dockgate::sidecar
