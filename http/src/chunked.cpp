#include "dockgate/http/chunked.hpp"

#include <algorithm>

namespace dockgate::http {

chunked_decoder::result chunked_decoder::feed(std::string_view in) {
  std::size_t i = 0;
  while (i < in.size()) {
    const char c = in[i];
    switch (state_) {
      case state::size: {
        int v = -1;
        if (c >= '0' && c <= '9')
          v = c - '0';
        else if (c >= 'a' && c <= 'f')
          v = c - 'a' + 10;
        else if (c >= 'A' && c <= 'F')
          v = c - 'A' + 10;
        if (v >= 0) {
          if (++digits_ > 15) return {status::error, i, {}};
          remaining_ = remaining_ * 16 + static_cast<std::uint64_t>(v);
          ++i;
          break;
        }
        if (c != '\r' || digits_ == 0) return {status::error, i, {}};
        state_ = state::size_lf;
        ++i;
        break;
      }
      case state::size_lf:
        if (c != '\n') return {status::error, i, {}};
        ++i;
        digits_ = 0;
        state_ = remaining_ == 0 ? state::trailer_cr : state::data;
        break;
      case state::data: {
        const std::size_t n =
            static_cast<std::size_t>(std::min<std::uint64_t>(remaining_, in.size() - i));
        remaining_ -= n;
        if (remaining_ == 0) state_ = state::data_cr;
        return {status::data, i + n, in.substr(i, n)};
      }
      case state::data_cr:
        if (c != '\r') return {status::error, i, {}};
        ++i;
        state_ = state::data_lf;
        break;
      case state::data_lf:
        if (c != '\n') return {status::error, i, {}};
        ++i;
        state_ = state::size;
        break;
      case state::trailer_cr:
        if (c != '\r') return {status::error, i, {}};  // a trailer field
        ++i;
        state_ = state::trailer_lf;
        break;
      case state::trailer_lf:
        if (c != '\n') return {status::error, i, {}};
        ++i;
        state_ = state::done;
        return {status::done, i, {}};
      case state::done:
        return {status::done, i, {}};
    }
  }
  if (state_ == state::done) return {status::done, i, {}};
  return {status::need_more, i, {}};
}

}  // namespace dockgate::http
