#pragma once
// What the session core answers when it does not do what was asked: a refusal in the
// core's own words (what kind of failure, and a message for a person), never an HTTP
// shape. Each front turns a refusal into its API's body and status (the Aivory front:
// front/aivory/replies.cpp). Internal to the sidecar library.

#include <string>
#include <utility>
#include <variant>

namespace dockgate::sidecar {

enum class refusal_kind {
  invalid,        // the request names something malformed (an id, a path, a value)
  not_found,      // no such session (or file), or it is ending
  too_large,      // over a configured limit (a body, a file, an archive)
  busy,           // the session is held by another request past the queue timeout
  conflict,       // the session is not in the state the call needs (a pause of a paused one)
  unavailable,    // at capacity, or a store or the engine cannot be reached now
  engine_failed,  // the engine, or an object store, refused or failed what the core asked of it
  failed,         // anything else that went wrong here
};

struct refusal {
  refusal_kind kind = refusal_kind::failed;
  std::string message;
  bool operator==(const refusal&) const = default;
};

// A value, or the refusal in its place.
template <class T>
class outcome {
 public:
  outcome(T value) : v_(std::move(value)) {}
  outcome(refusal r) : v_(std::move(r)) {}
  bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }
  T& value() { return std::get<0>(v_); }
  const T& value() const { return std::get<0>(v_); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  const refusal& error() const { return std::get<1>(v_); }

 private:
  std::variant<T, refusal> v_;
};

inline refusal refuse(refusal_kind k, std::string message) {
  return {k, std::move(message)};
}

}  // namespace dockgate::sidecar
