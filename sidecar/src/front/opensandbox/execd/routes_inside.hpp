#pragma once
// The execd front's handlers, one per route of execd_routes.cpp's table. Internal to the
// sidecar library.

#include <optional>
#include <string_view>

#include "files/sandbox_files.hpp"
#include "front/opensandbox/execd/execd_kit.hpp"

namespace dockgate::sidecar::opensandbox::execd {

// execd's success without data: 200, an empty body (Content-Length: 0).
inline http_reply empty_ok() {
  http_reply r(200);
  r.content_type = "text/plain";
  return r;
}

// command_routes.cpp
http_reply run_command(call& c);
http_reply command_status(call& c);
http_reply command_logs(call& c);
http_reply interrupt_command(call& c);
http_reply metrics(call& c);
http_reply watch_metrics(call& c);
http_reply create_shell(call& c);
http_reply run_in_shell(call& c);
http_reply delete_shell(call& c);

// code_routes.cpp
http_reply create_context(call& c);
http_reply run_code(call& c);
http_reply interrupt_code(call& c);
http_reply list_contexts(call& c);
http_reply delete_contexts(call& c);
http_reply get_context(call& c);
http_reply delete_context(call& c);

// file_routes.cpp
http_reply upload_files(call& c);
http_reply download_file(call& c);
http_reply file_info_of(call& c);
http_reply delete_files(call& c);
http_reply make_directories(call& c);
http_reply delete_directories(call& c);
http_reply list_directory(call& c);
// execd's FileInfo as JSON, appended to `b`.
void append_file_info(std::string& b, const file_info& f);

// file_edit_routes.cpp
http_reply set_permissions(call& c);
http_reply move_files(call& c);
http_reply search_files(call& c);
http_reply replace_in_files(call& c);

// A Range field's single range "bytes=a-b" or "bytes=a-"; nullopt for anything else
// (ignored: the whole file is sent).
std::optional<byte_range> parse_range(std::string_view header);

}  // namespace dockgate::sidecar::opensandbox::execd
