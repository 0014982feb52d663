// multipart/form-data, strictly: the body must open with the boundary's delimiter line
// (a preamble before it is skipped, as RFC 2046 allows), every part's header block ends
// with an empty line, every part ends at "\r\n--boundary", and the closing delimiter
// "--boundary--" must come: a body cut anywhere (a truncated upload) is an error, never
// a shorter file.
#include "front/opensandbox/execd/multipart.hpp"

#include <algorithm>
#include <cctype>

namespace dockgate::sidecar::opensandbox::execd {

namespace {

std::string lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// The value of parameter `key` among "; key=value; key2=\"value\"" (nullopt if absent).
std::optional<std::string> parameter(std::string_view header, std::string_view key) {
  std::size_t at = header.find(';');
  while (at != std::string_view::npos) {
    std::string_view rest = header.substr(at + 1);
    const auto eq = rest.find('=');
    if (eq == std::string_view::npos) return std::nullopt;
    const std::string name = lower(trim(rest.substr(0, eq)));
    rest = trim(rest.substr(eq + 1));
    std::string value;
    std::size_t used = 0;
    if (!rest.empty() && rest.front() == '"') {
      std::size_t i = 1;
      for (; i < rest.size() && rest[i] != '"'; ++i) {
        if (rest[i] == '\\' && i + 1 < rest.size()) ++i;
        value += rest[i];
      }
      used = i + 1;
    } else {
      used = std::min(rest.find(';'), rest.size());
      value = std::string(trim(rest.substr(0, used)));
    }
    if (name == key) return value;
    const auto next = rest.find(';', std::min(used, rest.size()));
    if (next == std::string_view::npos) return std::nullopt;
    at = header.size() - rest.size() + next;
  }
  return std::nullopt;
}

// One part's header block (without its final empty line) into `p`; false if malformed.
bool read_headers(std::string_view block, multipart_part& p) {
  bool disposition = false;
  while (!block.empty()) {
    const auto eol = block.find("\r\n");
    const std::string_view line = block.substr(0, eol);
    block.remove_prefix(eol == std::string_view::npos ? block.size() : eol + 2);
    const auto colon = line.find(':');
    if (colon == std::string_view::npos) return false;
    const std::string name = lower(trim(line.substr(0, colon)));
    const std::string_view value = trim(line.substr(colon + 1));
    if (name == "content-disposition") {
      if (lower(value.substr(0, value.find(';'))) != "form-data") return false;
      auto n = parameter(value, "name");
      if (!n) return false;
      p.name = *n;
      p.filename = parameter(value, "filename").value_or("");
      disposition = true;
    } else if (name == "content-type") {
      p.content_type = std::string(value);
    }
  }
  return disposition;
}

}  // namespace

std::optional<std::string> multipart_boundary(std::string_view content_type) {
  const auto semi = content_type.find(';');
  if (lower(trim(content_type.substr(0, semi))) != "multipart/form-data") return std::nullopt;
  auto b = parameter(content_type, "boundary");
  if (!b || b->empty() || b->size() > 70) return std::nullopt;
  return b;
}

multipart_result parse_multipart(std::string_view body, std::string_view boundary,
                                 const multipart_limits& limits) {
  multipart_result out;
  const std::string delimiter = "--" + std::string(boundary);
  const std::string between = "\r\n" + delimiter;
  std::size_t at = body.starts_with(delimiter) ? 0 : body.find(between);
  if (at == std::string_view::npos) return {{}, "no multipart boundary in the body", false};
  at += body.starts_with(delimiter) && at == 0 ? delimiter.size() : between.size();
  for (;;) {
    const std::string_view after = body.substr(at);
    if (after.starts_with("--")) return out;  // the closing delimiter
    if (!after.starts_with("\r\n")) return {{}, "malformed multipart delimiter line", false};
    at += 2;
    const auto head_end = body.find("\r\n\r\n", at);
    const auto blank_first = body.substr(at).starts_with("\r\n");
    if (head_end == std::string_view::npos && !blank_first)
      return {{}, "multipart body cut inside a part's header", false};
    const std::size_t head_len = blank_first ? 0 : head_end - at;
    if (head_len > limits.max_header_bytes) return {{}, "a part's header is too large", true};
    multipart_part p;
    if (!read_headers(body.substr(at, head_len), p))
      return {{}, "a part has no form-data Content-Disposition with a name", false};
    at += blank_first ? 2 : head_len + 4;
    const auto end = body.find(between, at);
    if (end == std::string_view::npos) return {{}, "multipart body cut inside a part", false};
    if (end - at > limits.max_part_bytes) return {{}, "a part is too large", true};
    if (out.parts.size() == limits.max_parts) return {{}, "too many parts", true};
    p.body = std::string(body.substr(at, end - at));
    out.parts.push_back(std::move(p));
    at = end + between.size();
  }
}

}  // namespace dockgate::sidecar::opensandbox::execd
