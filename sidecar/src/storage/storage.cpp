// Storage blocks and the S3/OSS object store (the local one: local_store.cpp). See
// storage.hpp for the invariants kept.
#include "storage/storage.hpp"

#include <simdjson.h>

#include <algorithm>
#include <ctime>
#include <filesystem>

#include "dockgate/client/engine.hpp"
#include "storage/archive.hpp"
#include "storage/local_store.hpp"
#include "storage/storage_endpoint.hpp"

namespace dockgate::sidecar {

namespace {

bool valid_bucket(std::string_view b) {
  return !b.empty() && b.size() <= 255 &&
         std::all_of(b.begin(), b.end(),
                     [](char c) {
                       return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' ||
                              c == '.';
                     }) &&
         b != "." && b != "..";
}

// The prefix of a storage block as a base path: slashes trimmed, then only safe
// characters and plain segments (never one that climbs out of the directory or bucket).
std::optional<std::string> prefix_base(std::string_view prefix) {
  while (!prefix.empty() && prefix.back() == '/') prefix.remove_suffix(1);
  while (!prefix.empty() && prefix.front() == '/') prefix.remove_prefix(1);
  if (prefix.size() > 256) return std::nullopt;
  for (char c : prefix)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.' ||
          c == '/'))
      return std::nullopt;
  if (!prefix.empty() && !valid_object_key(prefix)) return std::nullopt;  // plain segments only
  return std::string(prefix);
}

// Aliyun OSS through its S3-compatible API: the regional endpoint oss-<region>.aliyuncs.com
// (as the Aivory sidecar's oss_endpoint names it) becomes s3.oss-<region>.aliyuncs.com, signed for
// <region>; OSS accepts only virtual-hosted requests (bucket in the host name). Other
// hosts (a custom domain, a test server) are used as given.
void oss_endpoint(std::string endpoint, const std::string& region_field, s3_config& c) {
  if (endpoint.find("://") == std::string::npos) endpoint = "https://" + endpoint;
  const auto scheme_end = endpoint.find("://") + 3;
  std::string host = endpoint.substr(scheme_end);
  while (!host.empty() && host.back() == '/') host.pop_back();
  std::string port;
  if (const auto colon = host.rfind(':');
      colon != std::string::npos && host.find(']') == std::string::npos) {
    port = host.substr(colon);
    host.resize(colon);
  }
  std::string region = region_field;
  std::string bare = host.starts_with("s3.") ? host.substr(3) : host;
  const std::string suffix = ".aliyuncs.com";
  if (bare.starts_with("oss-") && bare.ends_with(suffix)) {
    std::string r = bare.substr(4, bare.size() - 4 - suffix.size());
    if (r.ends_with("-internal")) r.resize(r.size() - 9);
    if (region.empty()) region = r;
    host = "s3." + bare;
  }
  c.endpoint = endpoint.substr(0, scheme_end) + host + port;
  c.region = region.empty() ? "us-east-1" : region;
  c.virtual_hosted = true;
}

void apply_limits(s3_config& s3, const config& c) {
  s3.max_attempts = static_cast<int>(std::clamp<std::int64_t>(c.s3_max_attempts, 1, 10));
  s3.timeout =
      std::chrono::seconds(std::max<std::int64_t>(1, c.s3_read_timeout_s + c.s3_connect_timeout_s));
}

class s3_store final : public object_store {
 public:
  explicit s3_store(s3_config c) : client_(std::move(c)) {}

  stored_object get(const std::string& key, std::size_t max_bytes) override {
    stored_object o;
    auto r = client_.get_object(key, max_bytes);
    if (r.status == 404) return o;
    if (r.status == 200) {
      o.what = stored_object::state::found;
      o.data = std::move(r.body);
      o.generation = r.etag;
      return o;
    }
    o.what = stored_object::state::error;
    o.error = r.error == "response too large"
                  ? key + " is larger than " + std::to_string(max_bytes) + " bytes"
                  : "GET " + key + ": " + r.describe();
    return o;
  }

  std::optional<std::string> generation(const std::string& key, std::string& err) override {
    auto r = client_.head_object(key);
    if (r.status == 404) return std::string();
    if (r.status == 200) return r.etag.empty() ? r.last_modified : r.etag;
    err = "HEAD " + key + ": " + r.describe();
    return std::nullopt;
  }

  std::optional<std::string> put(const std::string& key, std::string_view data,
                                 std::string_view content_type, std::string& err) override {
    // One PUT: the object appears whole or not at all.
    auto r = client_.put_object(key, data, content_type);
    if (r.status != 200) {
      err = "PUT " + key + ": " + r.describe();
      return std::nullopt;
    }
    if (!r.etag.empty()) return r.etag;
    return generation(key, err);
  }

  std::optional<std::string> replace(const std::string& key, std::string_view data,
                                     std::string_view content_type, const std::string& expected,
                                     bool& changed, std::string& err) override {
    auto r = client_.put_object(key, data, content_type, &expected);
    changed = r.status == 412 ||
              r.status == 409;  // precondition failed, or a concurrent conditional write
    if (r.status != 200) {
      if (!changed) err = "PUT " + key + ": " + r.describe();
      return std::nullopt;
    }
    if (!r.etag.empty()) return r.etag;
    return generation(key, err);
  }

  std::shared_ptr<void> lock_key(const std::string&) override { return nullptr; }

  bool copy(const std::string& from, const std::string& to, std::string& err) override {
    auto r = client_.copy_object(from, to);
    if (r.status == 200) return true;
    err = "copy " + from + ": " + r.describe();
    return false;
  }

  bool remove(const std::string& key, std::string& err) override {
    auto r = client_.delete_object(key);
    if (r.ok() || r.status == 404) return true;
    err = "DELETE " + key + ": " + r.describe();
    return false;
  }

  bool list(const std::string& prefix, std::vector<object_entry>& out, std::string& err) override {
    std::vector<s3_object> objects;
    auto r = client_.list_objects(prefix, objects);
    if (r.status != 200) {
      err = "list " + prefix + ": " + r.describe();
      return false;
    }
    for (auto& o : objects) out.push_back({std::move(o.key), o.size, o.last_modified});
    return true;
  }

  std::optional<std::string> presign_get(const std::string& key, std::int64_t ttl,
                                         std::int64_t now) override {
    return client_.presign_get(key, ttl, now);
  }

 private:
  s3_client client_;
};

}  // namespace

bool valid_object_key(std::string_view key) {
  if (key.empty() || key.size() > 1024 || key.front() == '/') return false;
  if (key.find('\0') != std::string_view::npos || key.find('\\') != std::string_view::npos)
    return false;
  std::size_t start = 0;
  for (;;) {
    const auto slash = key.find('/', start);
    const auto seg =
        key.substr(start, slash == std::string_view::npos ? std::string_view::npos : slash - start);
    if (seg.empty() || seg == "." || seg == "..") return false;
    if (slash == std::string_view::npos) return true;
    start = slash + 1;
  }
}

std::string_view storage_spec::provider_name() const {
  switch (provider) {
    case storage_provider::local:
      return "local";
    case storage_provider::s3:
      return "s3";
    case storage_provider::aliyun_oss:
      return "aliyun_oss";
  }
  return "local";
}

std::string storage_spec::archive_key(std::string_view stem) const {
  return (base.empty() ? std::string() : base + "/") + "workspaces/" + std::string(stem) + ".tgz";
}

std::string storage_spec::object_key(std::string_view key) const {
  return (base.empty() ? std::string() : base + "/") + std::string(key);
}

std::string storage_spec::label() const {
  std::string out = "{\"provider\":";
  client::append_json_string(out, provider_name());
  out += ",\"base\":";
  client::append_json_string(out, base);
  if (provider != storage_provider::local) {
    out += ",\"bucket\":";
    client::append_json_string(out, s3.bucket);
    out += ",\"endpoint\":";
    client::append_json_string(out, s3.endpoint);
    out += ",\"region\":";
    client::append_json_string(out, s3.region);
    out += s3.virtual_hosted ? ",\"virtual_hosted\":true" : ",\"virtual_hosted\":false";
  }
  return out + "}";
}

std::string storage_spec::where() const {
  if (provider == storage_provider::local)
    return "local:" + (base.empty() ? std::string("/") : base + "/");
  return std::string(provider_name()) + "://" + s3.bucket + "/" + base + " at " + s3.endpoint;
}

bool storage_spec::same_place(const storage_spec& o) const {
  return provider == o.provider && base == o.base &&
         (provider == storage_provider::local ||
          (s3.bucket == o.s3.bucket && s3.endpoint == o.s3.endpoint && s3.region == o.s3.region &&
           s3.virtual_hosted == o.s3.virtual_hosted));
}

namespace {

// A storage block's string member: "" when absent or null; one that is not a string sets
// `problem` (the first problem found is the one answered).
struct block_reader {
  simdjson::dom::object obj;
  std::optional<std::string>& problem;
  std::string text(const char* key) const {
    simdjson::dom::element v;
    std::string_view s;
    if (obj.at_key(key).get(v) != simdjson::SUCCESS || v.is_null()) return std::string();
    if (v.get_string().get(s) != simdjson::SUCCESS) {
      if (!problem) problem = std::string("storage.") + key + " must be a string";
      return std::string();
    }
    return std::string(s);
  }
};

// provider "s3": AWS itself (virtual-hosted, the regional endpoint) or an explicit
// endpoint (MinIO, AIStor, Ceph: path-style, as the Aivory sidecar configures boto3),
// which must be allowed (storage_endpoint_allowed).
void read_s3_block(const block_reader& b, storage_spec& s, const config& c,
                   std::optional<std::string>& problem) {
  s.provider = storage_provider::s3;
  s.s3.bucket = b.text("s3_bucket");
  s.s3.region = b.text("s3_region");
  if (s.s3.region.empty()) s.s3.region = "us-east-1";
  const std::string endpoint = b.text("s3_endpoint");
  if (endpoint.empty()) {
    s.s3.endpoint = "https://s3." + s.s3.region + ".amazonaws.com";
    s.s3.virtual_hosted = true;
  } else {
    s.s3.endpoint = endpoint;
    while (s.s3.endpoint.ends_with('/')) s.s3.endpoint.pop_back();
  }
  s.s3.access_key = b.text("s3_access_key");
  s.s3.secret_key = b.text("s3_secret_key");
  if (!problem && s.s3.bucket.empty()) problem = "storage.s3_bucket is required";
  if (!problem && !valid_bucket(s.s3.bucket)) problem = "invalid storage.s3_bucket";
  if (!problem && (s.s3.access_key.empty() || s.s3.secret_key.empty()))
    problem = "storage.s3_access_key and storage.s3_secret_key are required";
  if (!problem)
    if (auto bad = s3_endpoint_problem(s.s3.endpoint))
      problem = "invalid storage.s3_endpoint: " + *bad;
  if (!problem && !storage_endpoint_allowed(s.s3.endpoint, c))
    problem = "invalid storage.s3_endpoint: " + s.s3.endpoint +
              " is not an allowed storage endpoint (SANDBOX_STORAGE_ENDPOINTS)";
}

// provider "aliyun_oss": OSS through its S3-compatible API (virtual-hosted, SigV4), at an
// allowed endpoint.
void read_oss_block(const block_reader& b, storage_spec& s, const config& c,
                    std::optional<std::string>& problem) {
  s.provider = storage_provider::aliyun_oss;
  s.s3.bucket = b.text("oss_bucket");
  const std::string endpoint = b.text("oss_endpoint");
  s.s3.access_key = b.text("oss_access_key_id");
  s.s3.secret_key = b.text("oss_access_key_secret");
  const std::string region = b.text("oss_region");
  if (!problem && (s.s3.bucket.empty() || endpoint.empty() || s.s3.access_key.empty() ||
                   s.s3.secret_key.empty()))
    problem =
        "storage.oss_bucket, oss_endpoint, oss_access_key_id and oss_access_key_secret are "
        "required";
  if (!problem && !valid_bucket(s.s3.bucket)) problem = "invalid storage.oss_bucket";
  if (!problem) {
    oss_endpoint(endpoint, region, s.s3);
    if (auto bad = s3_endpoint_problem(s.s3.endpoint))
      problem = "invalid storage.oss_endpoint: " + *bad;
    else if (!storage_endpoint_allowed(s.s3.endpoint, c))
      problem = "invalid storage.oss_endpoint: " + s.s3.endpoint +
                " is not an allowed storage endpoint (SANDBOX_STORAGE_ENDPOINTS)";
  }
}

}  // namespace

storage_choice choose_storage(std::string_view json, const config& c) {
  storage_choice out;
  // No block: no storage, as the Aivory sidecar's (its storage is "not effective": nothing
  // archived, restored or collected). SANDBOX_LOCAL_STORAGE_DIR serves `provider: local`
  // blocks only: an archive nobody asked for would be read by nobody and collected by nobody.
  if (json.empty() || json == "null") return out;
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  simdjson::dom::object obj;
  if (parser.parse(json.data(), json.size()).get(doc) != simdjson::SUCCESS ||
      doc.get_object().get(obj) != simdjson::SUCCESS) {
    out.error = "storage must be an object";
    return out;
  }
  std::optional<std::string> problem;
  const block_reader b{obj, problem};
  const std::string provider = b.text("provider");
  const std::string prefix =
      obj.at_key("prefix").error() == simdjson::SUCCESS ? b.text("prefix") : "workspaces/";
  storage_spec s;
  const auto base = prefix_base(prefix.empty() ? "workspaces/" : prefix);
  if (!base)
    problem = problem.value_or("invalid storage prefix");
  else
    s.base = *base;
  if (provider == "local") {
    std::error_code ec;
    if (!problem && in_sidecar_own_area(s.base))
      problem = "invalid storage prefix: " + s.base + " is the sidecar's own";
    if (!problem &&
        (c.local_storage_dir.empty() || !std::filesystem::is_directory(c.local_storage_dir, ec)))
      problem = "storage backend not configured";
  } else if (provider == "s3") {
    read_s3_block(b, s, c, problem);
  } else if (provider == "aliyun_oss") {
    read_oss_block(b, s, c, problem);
  } else if (!problem) {
    problem = "unsupported storage provider: " + provider;
  }
  if (problem) {
    out.error = problem;
    return out;
  }
  apply_limits(s.s3, c);
  out.spec = std::move(s);
  return out;
}

bool storage_endpoint_allowed(std::string_view endpoint, const config& c) {
  return endpoint_allowed(endpoint, c.storage_endpoints);  // storage_endpoint.hpp
}

std::optional<storage_spec> storage_from_label(std::string_view label, const config& c) {
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  if (parser.parse(label.data(), label.size()).get(doc) != simdjson::SUCCESS) return std::nullopt;
  std::string_view provider, base;
  if (doc["provider"].get_string().get(provider) != simdjson::SUCCESS ||
      doc["base"].get_string().get(base) != simdjson::SUCCESS)
    return std::nullopt;
  storage_spec s;
  if (!prefix_base(base) || *prefix_base(base) != base) return std::nullopt;
  s.base = std::string(base);
  if (provider == "local") return s;
  if (provider == "s3")
    s.provider = storage_provider::s3;
  else if (provider == "aliyun_oss")
    s.provider = storage_provider::aliyun_oss;
  else
    return std::nullopt;
  std::string_view bucket, endpoint, region;
  bool virtual_hosted = false;
  if (doc["bucket"].get_string().get(bucket) != simdjson::SUCCESS ||
      doc["endpoint"].get_string().get(endpoint) != simdjson::SUCCESS ||
      doc["region"].get_string().get(region) != simdjson::SUCCESS ||
      doc["virtual_hosted"].get_bool().get(virtual_hosted) != simdjson::SUCCESS ||
      !valid_bucket(bucket) || s3_endpoint_problem(endpoint) ||
      !storage_endpoint_allowed(endpoint, c))
    return std::nullopt;
  s.s3.bucket = std::string(bucket);
  s.s3.endpoint = std::string(endpoint);
  s.s3.region = std::string(region);
  s.s3.virtual_hosted = virtual_hosted;
  s.has_credentials = false;
  apply_limits(s.s3, c);
  return s;
}

std::unique_ptr<object_store> open_store(const storage_spec& spec, const config& c) {
  if (spec.provider == storage_provider::local) return make_local_store(c.local_storage_dir);
  return std::make_unique<s3_store>(spec.s3);
}

}  // namespace dockgate::sidecar
