#pragma once
// The Aivory front's cell answers (POST /exec, POST /sessions/{id}/restart): the result
// object, the kernel block, and the streamed form. Written here only (cell_routes.cpp);
// cells return typed results (cells/cell_contract.hpp). Internal to the sidecar library.

#include <string>
#include <string_view>

#include "cells/cell_contract.hpp"
#include "cells/cell_output.hpp"
#include "front/http_server.hpp"

namespace dockgate::sidecar::aivory {

// {"stdout":..,"stderr":..,"exit_code":..,"files":[{"name","mime_type","data_base64"}]},
// and ,"kernel":{..} for a kernel session's cell.
std::string cell_body(const cell_result& r);
// The answer's `kernel` object: {"name":..,"restarted":..,"execution_count":..}.
std::string kernel_json(std::string_view name, const kernel_status& st);

// Streamed output (POST /exec with Accept: text/event-stream): `event: stdout` and
// `event: stderr` whose data is the JSON string of a piece of output, as it arrives
// (a UTF-8 sequence cut by a read is held back until it is whole), then `event: result`
// with the answer's JSON object, or `event: error` with an error body once output has
// gone out. The stream opens with the first event.
bool wants_event_stream(std::string_view accept);
// The longest prefix of `s` that does not end inside a UTF-8 sequence.
std::size_t utf8_whole_prefix(std::string_view s);

class cell_events final : public cell_output {
 public:
  explicit cell_events(reply_stream* stream) : stream_(stream) {}
  bool active() const { return stream_ != nullptr; }
  bool opened() const { return stream_ && stream_->opened(); }
  void output(int stream, std::string_view data) override;
  // What is held back, sent as it is (an incomplete sequence becomes U+FFFD).
  void flush();
  // `data`: JSON text if `json`, else a string to send as a JSON string.
  void send(std::string_view event, std::string_view data, bool json);

 private:
  reply_stream* stream_;
  std::string held_[2];  // stdout, stderr
};

}  // namespace dockgate::sidecar::aivory
