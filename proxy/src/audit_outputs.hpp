#pragma once
// The kinds of audit sink (audit_sink.hpp): a descriptor (stdout), a file with size
// rotation, the systemd journal's native protocol, syslog (RFC 5424).

#include <memory>
#include <span>
#include <string>

#include "audit_sink.hpp"

namespace dockgate::proxy {

std::unique_ptr<audit_output> open_fd_output(int fd, std::string name);
std::unique_ptr<audit_output> open_file_output(const audit_target& t, std::uint64_t max_bytes,
                                               unsigned keep, std::string& error);
std::unique_ptr<audit_output> open_journald_output(const audit_target& t, std::string& error);
std::unique_ptr<audit_output> open_syslog_output(const audit_target& t, std::string& error);

// Sends the messages of `bytes` from message `first` on (message i ends at ends[i]) as
// datagrams on a connected socket without waiting (sendmmsg, up to 64 a call); returns
// where the last message sent ends, and `err`: 0 when all were sent, else the errno of the
// first not sent.
std::size_t send_datagrams(int fd, std::string_view bytes, std::span<const std::size_t> ends,
                           std::size_t first, int& err);

// Connects a socket: a unix datagram socket at `path`, or (host non-empty) UDP or TCP.
int connect_unix_datagram(const std::string& path, std::string& error);
int connect_inet(const std::string& host, const std::string& port, bool tcp, std::string& error);

}  // namespace dockgate::proxy
