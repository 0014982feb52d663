#pragma once
// The Aivory front's parsing kit: a JSON request body read once into the fields a route's
// typed request is made of, and the Aivory sidecar's answers to what cannot be read:
// {"detail": ...} and FastAPI's 422 shape. Internal to the sidecar library.

#include <simdjson.h>

#include <algorithm>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "dockgate/client/engine.hpp"
#include "dockgate/common/percent.hpp"
#include "front/http_server.hpp"

namespace dockgate::sidecar {

inline http_reply detail(unsigned status, std::string_view message) {
  std::string body = "{\"detail\":";
  client::append_json_string(body, message);
  return {status, body + "}"};
}

// FastAPI's shape for a validation error.
inline http_reply invalid(std::string_view field, std::string_view msg, std::string_view type) {
  std::string body = R"({"detail":[{"loc":["body",)";
  client::append_json_string(body, field);
  body += "],\"msg\":";
  client::append_json_string(body, msg);
  body += ",\"type\":";
  client::append_json_string(body, type);
  return {422, body + "}]}"};
}

// A parsed JSON request body (object), or the 422 to answer.
struct body_fields {
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  std::optional<http_reply> error;

  explicit body_fields(const std::string& body, bool allow_empty = false) {
    if (body.empty() && allow_empty) {
      if (parser.parse("{}", 2).get(doc) != simdjson::SUCCESS)
        error = invalid("body", "internal", "internal");
      return;
    }
    if (parser.parse(body).get(doc) != simdjson::SUCCESS || !doc.is_object())
      error = invalid("body", "value is not a valid JSON object", "value_error.jsondecode");
  }
  std::optional<std::string> string(const char* key, bool required,
                                    std::optional<http_reply>& err) {
    simdjson::dom::element v;
    if (doc.at_key(key).get(v) != simdjson::SUCCESS || v.is_null()) {
      if (required && !err) err = invalid(key, "field required", "value_error.missing");
      return std::nullopt;
    }
    std::string_view s;
    if (v.get_string().get(s) != simdjson::SUCCESS) {
      if (!err) err = invalid(key, "str type expected", "type_error.str");
      return std::nullopt;
    }
    return std::string(s);
  }
  std::optional<std::int64_t> integer(const char* key, std::optional<http_reply>& err) {
    simdjson::dom::element v;
    if (doc.at_key(key).get(v) != simdjson::SUCCESS || v.is_null()) return std::nullopt;
    std::int64_t n = 0;
    if (v.get_int64().get(n) != simdjson::SUCCESS) {
      if (!err) err = invalid(key, "value is not a valid integer", "type_error.integer");
      return std::nullopt;
    }
    return n;
  }
  bool boolean(const char* key) {
    bool b = false;
    return doc.at_key(key).get_bool().get(b) == simdjson::SUCCESS && b;
  }
  // The text of member `key` as JSON (minified), "" when absent or null: a block handed
  // whole to the room that reads it (the "storage" block: storage.hpp's choose_storage).
  std::string raw(const char* key) {
    simdjson::dom::element v;
    if (doc.at_key(key).get(v) != simdjson::SUCCESS || v.is_null()) return {};
    return simdjson::minify(v);
  }
};

// A route's typed request, parsed once from its body, or the answer in its place (a 422
// of a field, or a 400/413 of a value or a limit the front checks before the core).
template <class T>
class parsed {
 public:
  parsed(T value) : v_(std::move(value)) {}
  parsed(http_reply refused) : v_(std::move(refused)) {}
  explicit operator bool() const { return v_.index() == 0; }
  T& operator*() { return std::get<0>(v_); }
  T* operator->() { return &std::get<0>(v_); }
  const http_reply& error() const { return std::get<1>(v_); }

 private:
  std::variant<T, http_reply> v_;
};

// The body of a route that names only a session: {"session_id": "..."}. The id itself is
// checked where the session is looked up (session_registry::acquire: 400, 404, 429).
inline parsed<std::string> session_named(const std::string& body) {
  body_fields f(body);
  if (f.error) return *f.error;
  std::optional<http_reply> err;
  auto sid = f.string("session_id", true, err);
  if (err) return *err;
  return *sid;
}

// The value of each `name` of a query string, in order, each key and value decoded as
// dockerd reads a query (common/percent.hpp: %XX and '+'); nullopt when any pair of it has
// a malformed escape (refused, never guessed).
inline std::optional<std::vector<std::string>> query_values(std::string_view query,
                                                            std::string_view name) {
  std::vector<std::string> out;
  while (!query.empty()) {
    const auto amp = std::min(query.find('&'), query.size());
    const auto pair = query.substr(0, amp);
    query.remove_prefix(std::min(amp + 1, query.size()));
    const auto eq = std::min(pair.find('='), pair.size());
    auto key = common::percent_decode_query(pair.substr(0, eq));
    auto value =
        common::percent_decode_query(eq < pair.size() ? pair.substr(eq + 1) : std::string_view());
    if (!key || !value) return std::nullopt;
    if (*key == name) out.push_back(std::move(*value));
  }
  return out;
}

}  // namespace dockgate::sidecar
