// A port of a sandbox reached from the sidecar: a relay exec'd in the container as the
// session user between the exec's stdin/stdout and 127.0.0.1:<port> there (commands.hpp,
// commands::connect). The front (front/opensandbox/port_proxy.cpp) speaks HTTP over it.
//
// Invariants it keeps:
// - Nothing is published, no network is attached, no daemon is copied in: the relay is a
//   tool the image already has (python3, else bash's /dev/tcp, else nc), run only for the
//   length of one forwarded request, in the sandbox's own network namespace, so it reaches
//   only what the sandbox's own processes could.
// - The relay runs as the session user (never the container's own user) and only in a
//   sandbox that is found, not ending and not frozen (a paused sandbox answers conflict at
//   once; an exec into a frozen container would hang).
// - Its failures are told apart from an app's answer: a refused connection and a missing
//   relay tool write a marker of their own on stderr, and a relay writes nothing on stdout
//   that did not come from the port.
#include <string>

#include "commands/commands.hpp"
#include "engine/labels.hpp"
#include "sessions/session.hpp"

namespace dockgate::sidecar {

namespace {

// python3 -c <this> PORT: connect (5 s), then copy stdin → socket in a thread and socket →
// stdout until the app closes. Unbuffered both ways (an app's streamed answer flows).
constexpr std::string_view python_relay = R"py(
import os, socket, sys, threading
try:
    s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), 5)
except OSError as e:
    os.write(2, ("dockgate:connect-failed " + str(e)).encode()); sys.exit(111)
s.settimeout(None)
def up():
    try:
        while True:
            b = os.read(0, 65536)
            if not b: break
            s.sendall(b)
        s.shutdown(socket.SHUT_WR)  # the client's end, told to the app (a tunnel's close)
    except OSError:
        return
threading.Thread(target=up, daemon=True).start()
out = sys.stdout.buffer
while True:
    try:
        b = s.recv(65536)
    except OSError:
        break
    if not b: break
    out.write(b); out.flush()
)py";

// sh -c <this> sh PORT PYTHON_RELAY: the first relay tool the image has. bash's copy of
// stdin runs in the background (from fd 4: a background job's own stdin is /dev/null) with
// its stderr away from the exec's, so the exec ends when the app closes and the exec's
// stdin closing ends the copy. nc says a refused connection in its own words (the front
// reads an end with no byte from the port as one).
constexpr std::string_view relay_script = R"sh(
if command -v python3 >/dev/null 2>&1; then exec python3 -c "$2" "$1"; fi
if command -v bash >/dev/null 2>&1; then
  exec bash -c 'exec 4<&0; exec 3<>"/dev/tcp/127.0.0.1/$0" 2>/dev/null || { printf "%s" "dockgate:connect-failed connection refused" >&2; exit 111; }
cat <&4 >&3 2>/dev/null & cat <&3' "$1"
fi
if command -v nc >/dev/null 2>&1; then exec nc 127.0.0.1 "$1"; fi
printf '%s' 'dockgate:no-relay' >&2; exit 127
)sh";

}  // namespace

outcome<client::exec_stream> commands::connect(const std::string& session_id, std::uint16_t port,
                                               client::clock_type::time_point deadline) const {
  auto container = container_of(session_id);
  if (!container) return container.error();
  std::string error;
  auto stream = engine_.exec_attach(container.value(),
                                    {"sh", "-c", std::string(relay_script), "sh",
                                     std::to_string(port), std::string(python_relay)},
                                    session_user, deadline, &error);
  if (!stream) return refuse(refusal_kind::engine_failed, "exec failed: " + error);
  return std::move(*stream);
}

}  // namespace dockgate::sidecar
