#include "dockgate/sidecar/s3.hpp"

#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/sha.h>

#include <ctime>

#include "dockgate/client/http_client.hpp"

namespace dockgate::sidecar {

namespace {

std::string hex(const unsigned char* data, std::size_t n) {
  static constexpr char digits[] = "0123456789abcdef";
  std::string out;
  for (std::size_t i = 0; i < n; ++i) {
    out += digits[data[i] >> 4];
    out += digits[data[i] & 15];
  }
  return out;
}

std::string hmac(std::string_view key, std::string_view data) {
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()), reinterpret_cast<const unsigned char*>(data.data()),
       data.size(), out, &len);
  return std::string(reinterpret_cast<char*>(out), len);
}

}  // namespace

std::string sha256_hex(std::string_view data) {
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(data.data()), data.size(), digest);
  return hex(digest, sizeof digest);
}

std::string s3_uri_encode(std::string_view key) {
  static constexpr char digits[] = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : key) {
    if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_' ||
        c == '.' || c == '~' || c == '/') {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += digits[c >> 4];
      out += digits[c & 15];
    }
  }
  return out;
}

std::string sigv4_authorization(std::string_view method, std::string_view canonical_uri, std::string_view host,
                                std::string_view payload_sha256, std::string_view amz_date, const s3_config& c) {
  const std::string date(amz_date.substr(0, 8));
  const std::string scope = date + "/" + c.region + "/s3/aws4_request";
  const std::string canonical = std::string(method) + "\n" + std::string(canonical_uri) + "\n\n" + "host:" +
                                std::string(host) + "\n" + "x-amz-content-sha256:" + std::string(payload_sha256) + "\n" +
                                "x-amz-date:" + std::string(amz_date) + "\n\n" +
                                "host;x-amz-content-sha256;x-amz-date\n" + std::string(payload_sha256);
  const std::string to_sign = "AWS4-HMAC-SHA256\n" + std::string(amz_date) + "\n" + scope + "\n" + sha256_hex(canonical);
  const std::string key = hmac(hmac(hmac(hmac("AWS4" + c.secret_key, date), c.region), "s3"), "aws4_request");
  const std::string signature = hmac(key, to_sign);
  return "AWS4-HMAC-SHA256 Credential=" + c.access_key + "/" + scope +
         ", SignedHeaders=host;x-amz-content-sha256;x-amz-date, Signature=" +
         hex(reinterpret_cast<const unsigned char*>(signature.data()), signature.size());
}

s3_result s3_client::request(std::string_view method, std::string_view key, std::string_view body,
                             std::string_view content_type, std::size_t max_bytes, std::chrono::seconds timeout) {
  s3_result r;
  std::string endpoint = config_.endpoint;
  const bool https = endpoint.starts_with("https://");
  if (!https && !endpoint.starts_with("http://")) {
    r.error = "s3_endpoint must be http:// or https://";
    return r;
  }
  std::string hostport = endpoint.substr(https ? 8 : 7);
  while (!hostport.empty() && hostport.back() == '/') hostport.pop_back();
  if (hostport.empty() || hostport.find('/') != std::string::npos) {
    r.error = "s3_endpoint must be scheme://host[:port]";
    return r;
  }
  std::string error;
  const bool has_port = hostport.front() == '[' ? hostport.find("]:") != std::string::npos
                                                : hostport.find(':') != std::string::npos;
  auto ep = common::parse_endpoint("tcp://" + (has_port ? hostport : hostport + (https ? ":443" : ":80")), &error);
  if (!ep) {
    r.error = "s3_endpoint: " + error;
    return r;
  }
  client::transport t{*ep, nullptr};
  if (https) {
    t.tls = client::tls_context::create("", "", "", &error);
    if (!t.tls) {
      r.error = error;
      return r;
    }
  }
  char amz_date[32];
  const std::time_t now = std::time(nullptr);
  std::tm utc{};
  gmtime_r(&now, &utc);
  std::strftime(amz_date, sizeof amz_date, "%Y%m%dT%H%M%SZ", &utc);
  const std::string uri = "/" + config_.bucket + "/" + s3_uri_encode(key);
  const std::string payload = sha256_hex(body);
  const std::string headers = "x-amz-date: " + std::string(amz_date) + "\r\nx-amz-content-sha256: " + payload +
                              "\r\nAuthorization: " + sigv4_authorization(method, uri, hostport, payload, amz_date, config_) +
                              "\r\n";
  auto response = client::http_request(t, method, uri, body, timeout, max_bytes, headers, hostport,
                                       content_type.empty() ? "application/octet-stream" : content_type);
  r.status = response.status;
  r.body = std::move(response.body);
  r.error = std::move(response.error);
  return r;
}

s3_result s3_client::put_object(std::string_view key, std::string_view data, std::string_view content_type,
                                std::chrono::seconds timeout) {
  return request("PUT", key, data, content_type, 1 << 20, timeout);
}

s3_result s3_client::get_object(std::string_view key, std::size_t max_bytes, std::chrono::seconds timeout) {
  return request("GET", key, {}, {}, max_bytes, timeout);
}

s3_result s3_client::delete_object(std::string_view key, std::chrono::seconds timeout) {
  return request("DELETE", key, {}, {}, 1 << 20, timeout);
}

}  // namespace dockgate::sidecar
