#pragma once
// Strict decoder for chunked bodies: the client's requests, and the daemon's answers on
// their way back (Go writes neither extensions nor trailers).
//
// Invariant: chunk sizes are bare hex (no extensions, no whitespace, at most 15 digits),
// every chunk ends in CRLF, and the last chunk is followed directly by CRLF (no trailers).
// Chunk extensions and trailers are refused: dockerd ignores them, a checker that does
// not is reading a different body.

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace dockgate::http {

class chunked_decoder {
 public:
  enum class status { need_more, data, done, error };
  struct result {
    status state;
    std::size_t consumed;   // bytes of the input used
    std::string_view data;  // for status::data: body bytes (a view into the input)
  };

  // Decodes from `in`. Call again with the unconsumed rest (plus any new bytes).
  result feed(std::string_view in);
  bool done() const { return state_ == state::done; }

 private:
  enum class state { size, size_lf, data, data_cr, data_lf, trailer_cr, trailer_lf, done };
  state state_ = state::size;
  std::uint64_t remaining_ = 0;
  unsigned digits_ = 0;
};

}  // namespace dockgate::http
