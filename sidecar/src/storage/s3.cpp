// S3 requests signed with SigV4. See s3.hpp.
#include "storage/s3.hpp"

#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/sha.h>

#include <algorithm>
#include <ctime>
#include <thread>

#include "dockgate/client/http_client.hpp"
#include "dockgate/common/percent.hpp"

namespace dockgate::sidecar {

namespace {

constexpr std::string_view unsigned_payload = "UNSIGNED-PAYLOAD";

std::string hex(const unsigned char* data, std::size_t n) {
  static constexpr char digits[] = "0123456789abcdef";
  std::string out;
  out.reserve(n * 2);
  for (std::size_t i = 0; i < n; ++i) {
    out += digits[data[i] >> 4];
    out += digits[data[i] & 15];
  }
  return out;
}

std::string hmac(std::string_view key, std::string_view data) {
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
       reinterpret_cast<const unsigned char*>(data.data()), data.size(), out, &len);
  return std::string(reinterpret_cast<char*>(out), len);
}

std::string signing_key(std::string_view secret, std::string_view date, std::string_view region) {
  return hmac(hmac(hmac(hmac("AWS4" + std::string(secret), date), region), "s3"), "aws4_request");
}

// The text of the first <tag>...</tag> in `xml` from `pos`, advancing `pos` past it.
std::optional<std::string_view> xml_element(std::string_view xml, std::string_view tag,
                                            std::size_t& pos) {
  const std::string open = "<" + std::string(tag) + ">";
  const std::string close = "</" + std::string(tag) + ">";
  const auto start = xml.find(open, pos);
  if (start == std::string_view::npos) return std::nullopt;
  const auto end = xml.find(close, start + open.size());
  if (end == std::string_view::npos) return std::nullopt;
  pos = end + close.size();
  return xml.substr(start + open.size(), end - start - open.size());
}

// XML's five predefined entities and numeric references (keys in a listing are escaped).
std::string xml_unescape(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '&') {
      out += s[i];
      continue;
    }
    const auto semi = s.find(';', i);
    if (semi == std::string_view::npos) {
      out += s[i];
      continue;
    }
    const std::string_view entity = s.substr(i + 1, semi - i - 1);
    if (entity == "amp")
      out += '&';
    else if (entity == "lt")
      out += '<';
    else if (entity == "gt")
      out += '>';
    else if (entity == "quot")
      out += '"';
    else if (entity == "apos")
      out += '\'';
    else if (entity.size() > 1 && entity[0] == '#') {
      const bool is_hex = entity[1] == 'x';
      const unsigned long cp = std::strtoul(std::string(entity.substr(is_hex ? 2 : 1)).c_str(),
                                            nullptr, is_hex ? 16 : 10);
      if (cp < 0x80)
        out += static_cast<char>(cp);
      else if (cp < 0x800) {
        out += static_cast<char>(0xC0 | (cp >> 6));
        out += static_cast<char>(0x80 | (cp & 0x3F));
      } else if (cp < 0x10000) {
        out += static_cast<char>(0xE0 | (cp >> 12));
        out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
        out += static_cast<char>(0x80 | (cp & 0x3F));
      } else {
        out += static_cast<char>(0xF0 | (cp >> 18));
        out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
        out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
        out += static_cast<char>(0x80 | (cp & 0x3F));
      }
    } else {
      out.append(s.substr(i, semi - i + 1));
    }
    i = semi;
  }
  return out;
}

std::string unquote(std::string_view v) {
  if (v.size() >= 2 && v.front() == '"' && v.back() == '"') v = v.substr(1, v.size() - 2);
  return std::string(v);
}

struct split_endpoint {
  bool https = false;
  std::string hostport;  // as written (IPv6 in brackets)
};

std::optional<split_endpoint> split(std::string_view endpoint, std::string* error) {
  split_endpoint e;
  if (endpoint.starts_with("https://"))
    e.https = true;
  else if (!endpoint.starts_with("http://")) {
    if (error) *error = "endpoint must start with http:// or https://";
    return std::nullopt;
  }
  e.hostport = std::string(endpoint.substr(e.https ? 8 : 7));
  while (!e.hostport.empty() && e.hostport.back() == '/') e.hostport.pop_back();
  if (e.hostport.empty() || e.hostport.find_first_of("/?#@ \t\r\n\\") != std::string::npos) {
    if (error) *error = "endpoint must be scheme://host[:port] with nothing after it";
    return std::nullopt;
  }
  return e;
}

}  // namespace

std::string s3_result::describe() const {
  if (status == 0) return error.empty() ? "no response" : error;
  std::string out = "HTTP " + std::to_string(status);
  std::size_t pos = 0;
  if (auto code = xml_element(body, "Code", pos)) out += " " + std::string(*code);
  return out;
}

std::string sha256_hex(std::string_view data) {
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(data.data()), data.size(), digest);
  return hex(digest, sizeof digest);
}

std::string s3_uri_encode(std::string_view text, bool keep_slash) {
  return common::percent_encode(text, keep_slash ? common::percent_keep::unreserved_and_slash
                                                 : common::percent_keep::unreserved);
}

std::string sigv4_scope(std::string_view amz_date, std::string_view region) {
  return std::string(amz_date.substr(0, 8)) + "/" + std::string(region) + "/s3/aws4_request";
}

std::string sigv4_signature(const sigv4_request& r, std::string_view amz_date,
                            std::string_view region, std::string_view secret_key) {
  std::string canonical =
      std::string(r.method) + "\n" + r.canonical_uri + "\n" + r.canonical_query + "\n";
  std::string signed_headers;
  for (const auto& [name, value] : r.headers) {
    canonical += name + ":" + value + "\n";
    signed_headers += (signed_headers.empty() ? "" : ";") + name;
  }
  canonical += "\n" + signed_headers + "\n" + r.payload_hash;
  const std::string to_sign = "AWS4-HMAC-SHA256\n" + std::string(amz_date) + "\n" +
                              sigv4_scope(amz_date, region) + "\n" + sha256_hex(canonical);
  const std::string sig = hmac(signing_key(secret_key, amz_date.substr(0, 8), region), to_sign);
  return hex(reinterpret_cast<const unsigned char*>(sig.data()), sig.size());
}

std::string sigv4_authorization(std::string_view method, std::string_view canonical_uri,
                                std::string_view host, std::string_view payload_sha256,
                                std::string_view date, const s3_config& c) {
  sigv4_request r{method,
                  std::string(canonical_uri),
                  "",
                  {{"host", std::string(host)},
                   {"x-amz-content-sha256", std::string(payload_sha256)},
                   {"x-amz-date", std::string(date)}},
                  std::string(payload_sha256)};
  return "AWS4-HMAC-SHA256 Credential=" + c.access_key + "/" + sigv4_scope(date, c.region) +
         ", SignedHeaders=host;x-amz-content-sha256;x-amz-date, Signature=" +
         sigv4_signature(r, date, c.region, c.secret_key);
}

std::string amz_date(std::int64_t unix_seconds) {
  const std::time_t t = static_cast<std::time_t>(unix_seconds);
  std::tm utc{};
  gmtime_r(&t, &utc);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y%m%dT%H%M%SZ", &utc);
  return buf;
}

std::int64_t parse_s3_time(std::string_view text) {
  std::tm tm{};
  const std::string s(text);
  const char* end = strptime(s.c_str(), "%Y-%m-%dT%H:%M:%S", &tm);  // 2026-11-30T12:00:00.000Z
  if (!end)
    end = strptime(s.c_str(), "%a, %d %b %Y %H:%M:%S", &tm);  // Mon, 30 Nov 2026 12:00:00 GMT
  if (!end) return 0;
  const std::int64_t t = timegm(&tm);
  return t > 0 ? t : 0;
}

std::optional<std::string> s3_endpoint_problem(std::string_view endpoint) {
  std::string error;
  if (!split(endpoint, &error)) return error;
  return std::nullopt;
}

std::optional<std::string> s3_client::base_url(std::string* error) const {
  auto e = split(config_.endpoint, error);
  if (!e) return std::nullopt;
  return std::string(e->https ? "https://" : "http://") +
         (config_.virtual_hosted ? config_.bucket + "." : "") + e->hostport;
}

s3_result s3_client::request(std::string_view method, std::string_view key, std::string_view query,
                             std::vector<std::pair<std::string, std::string>> extra_signed,
                             std::string_view body, std::string_view content_type,
                             std::size_t max_bytes) {
  // Transport errors and 5xx (throttling, a restarting server) are retried with a short
  // back-off, as boto3's "standard" retry mode does; 4xx answers are final.
  s3_result r;
  const int attempts = std::max(1, config_.max_attempts);
  for (int i = 0; i < attempts; ++i) {
    if (i) std::this_thread::sleep_for(std::chrono::milliseconds(200 << std::min(i, 4)));
    r = attempt(method, key, query, extra_signed, body, content_type, max_bytes);
    if (r.status != 0 && r.status < 500) break;
  }
  return r;
}

s3_result s3_client::attempt(std::string_view method, std::string_view key, std::string_view query,
                             const std::vector<std::pair<std::string, std::string>>& extra_signed,
                             std::string_view body, std::string_view content_type,
                             std::size_t max_bytes) {
  s3_result r;
  std::string error;
  auto e = split(config_.endpoint, &error);
  if (!e) {
    r.error = "endpoint: " + error;
    return r;
  }
  const std::string host = (config_.virtual_hosted ? config_.bucket + "." : "") + e->hostport;
  const bool has_port = host.front() == '[' ? host.find("]:") != std::string::npos
                                            : host.find(':') != std::string::npos;
  auto ep = common::parse_endpoint(
      "tcp://" + (has_port ? host : host + (e->https ? ":443" : ":80")), &error);
  if (!ep) {
    r.error = "endpoint: " + error;
    return r;
  }
  client::transport t{*ep, nullptr};
  if (e->https) {
    t.tls = client::tls_context::create("", "", "", &error);
    if (!t.tls) {
      r.error = error;
      return r;
    }
  }
  const std::string date = amz_date(std::time(nullptr));
  const std::string uri =
      config_.virtual_hosted ? "/" + s3_uri_encode(key)
                             : "/" + config_.bucket + (key.empty() ? "" : "/" + s3_uri_encode(key));
  const std::string payload = sha256_hex(body);
  sigv4_request signed_request{method, uri, std::string(query), {}, payload};
  signed_request.headers = extra_signed;
  signed_request.headers.emplace_back("host", host);
  signed_request.headers.emplace_back("x-amz-content-sha256", payload);
  signed_request.headers.emplace_back("x-amz-date", date);
  std::sort(signed_request.headers.begin(), signed_request.headers.end());
  std::string headers, names;
  for (const auto& [name, value] : signed_request.headers) {
    names += (names.empty() ? "" : ";") + name;
    if (name != "host") headers += name + ": " + value + "\r\n";
  }
  headers += "Authorization: AWS4-HMAC-SHA256 Credential=" + config_.access_key + "/" +
             sigv4_scope(date, config_.region) + ", SignedHeaders=" + names + ", Signature=" +
             sigv4_signature(signed_request, date, config_.region, config_.secret_key) + "\r\n";
  const std::string target = query.empty() ? uri : uri + "?" + std::string(query);
  auto response =
      client::http_request(t, method, target, body, config_.timeout, max_bytes, headers, host,
                           content_type.empty() ? "application/octet-stream" : content_type);
  r.status = response.status;
  r.etag = unquote(response.header("etag"));
  r.last_modified = std::string(response.header("last-modified"));
  r.date = std::string(response.header("date"));
  r.body = std::move(response.body);
  r.error = std::move(response.error);
  return r;
}

s3_result s3_client::put_object(std::string_view key, std::string_view data,
                                std::string_view content_type, const std::string* if_match) {
  std::vector<std::pair<std::string, std::string>> conditions;
  if (if_match) {
    if (if_match->empty())
      conditions.emplace_back("if-none-match", "*");
    else
      conditions.emplace_back("if-match", "\"" + *if_match + "\"");
  }
  return request("PUT", key, {}, std::move(conditions), data, content_type, 1 << 20);
}

s3_result s3_client::get_object(std::string_view key, std::size_t max_bytes) {
  return request("GET", key, {}, {}, {}, {}, max_bytes);
}

s3_result s3_client::head_object(std::string_view key) {
  return request("HEAD", key, {}, {}, {}, {}, 0);
}

s3_result s3_client::delete_object(std::string_view key) {
  return request("DELETE", key, {}, {}, {}, {}, 1 << 20);
}

s3_result s3_client::copy_object(std::string_view from_key, std::string_view to_key) {
  auto r = request("PUT", to_key, {},
                   {{"x-amz-copy-source", "/" + config_.bucket + "/" + s3_uri_encode(from_key)}},
                   {}, {}, 1 << 20);
  // CopyObject can answer 200 with an <Error> body when the copy failed midway.
  if (r.status == 200 && r.body.find("<Error>") != std::string::npos) r.status = 500;
  return r;
}

s3_result s3_client::list_objects(std::string_view prefix, std::vector<s3_object>& out,
                                  std::size_t max_objects) {
  std::string token;
  for (;;) {
    // Canonical order: parameter names sorted.
    std::string query;
    if (!token.empty()) query += "continuation-token=" + s3_uri_encode(token, false) + "&";
    query += "list-type=2&prefix=" + s3_uri_encode(prefix, false);
    auto r = request("GET", {}, query, {}, {}, {}, 16 << 20);
    if (r.status != 200) return r;
    std::size_t pos = 0;
    while (auto contents = xml_element(r.body, "Contents", pos)) {
      std::size_t p = 0;
      s3_object o;
      if (auto k = xml_element(*contents, "Key", p)) o.key = xml_unescape(*k);
      p = 0;
      if (auto s = xml_element(*contents, "Size", p))
        o.size = std::strtoull(std::string(*s).c_str(), nullptr, 10);
      p = 0;
      if (auto m = xml_element(*contents, "LastModified", p)) o.last_modified = parse_s3_time(*m);
      out.push_back(std::move(o));
      if (out.size() >= max_objects) return r;
    }
    pos = 0;
    auto truncated = xml_element(r.body, "IsTruncated", pos);
    pos = 0;
    auto next = xml_element(r.body, "NextContinuationToken", pos);
    if (!truncated || *truncated != "true" || !next || next->empty()) return r;
    token = xml_unescape(*next);
  }
}

std::string s3_client::presign_get(std::string_view key, std::int64_t expires_in,
                                   std::int64_t now) const {
  std::string error;
  auto e = split(config_.endpoint, &error);
  if (!e) return {};
  const std::string host = (config_.virtual_hosted ? config_.bucket + "." : "") + e->hostport;
  const std::string uri = config_.virtual_hosted ? "/" + s3_uri_encode(key)
                                                 : "/" + config_.bucket + "/" + s3_uri_encode(key);
  const std::string date = amz_date(now);
  const std::string query =
      "X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=" +
      s3_uri_encode(config_.access_key + "/" + sigv4_scope(date, config_.region), false) +
      "&X-Amz-Date=" + date + "&X-Amz-Expires=" + std::to_string(expires_in) +
      "&X-Amz-SignedHeaders=host";
  sigv4_request r{"GET", uri, query, {{"host", host}}, std::string(unsigned_payload)};
  return std::string(e->https ? "https://" : "http://") + host + uri + "?" + query +
         "&X-Amz-Signature=" + sigv4_signature(r, date, config_.region, config_.secret_key);
}

}  // namespace dockgate::sidecar
