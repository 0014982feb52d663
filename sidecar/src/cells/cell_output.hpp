#pragma once
// Where a cell's output goes as it comes (a streamed answer): the executors write each
// piece of stdout (1) or stderr (2) they keep, after the output cap, in the order it
// arrived. A front implements it over its API's stream (the Aivory front: server-sent
// events, front/aivory/cell_events.hpp); cells know nothing of how it is sent.
// Internal to the sidecar library.

#include <string_view>

namespace dockgate::sidecar {

class cell_output {
 public:
  virtual ~cell_output() = default;
  virtual void output(int stream, std::string_view data) = 0;
};

}  // namespace dockgate::sidecar
