#include "dockgate/http/method.hpp"

namespace dockgate::http {

std::optional<method> parse_method(std::string_view token) {
  if (token == "GET") return method::get;
  if (token == "HEAD") return method::head;
  if (token == "POST") return method::post;
  if (token == "PUT") return method::put;
  if (token == "DELETE") return method::delete_;
  return std::nullopt;
}

std::optional<method> parse_method_or_patch(std::string_view token) {
  if (token == "PATCH") return method::patch;
  return parse_method(token);
}

std::string_view method_name(method m) {
  switch (m) {
    case method::get:
      return "GET";
    case method::head:
      return "HEAD";
    case method::post:
      return "POST";
    case method::put:
      return "PUT";
    case method::delete_:
      return "DELETE";
    case method::patch:
      return "PATCH";
  }
  return "?";
}

}  // namespace dockgate::http
