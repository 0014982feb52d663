#pragma once
// The operator's directory as an object store (storage.hpp's object_store). Internal to
// the sidecar library: open_store() makes one for a local storage block.

#include <memory>
#include <string>

#include "storage/storage.hpp"

namespace dockgate::sidecar {

std::unique_ptr<object_store> make_local_store(std::string dir);

}  // namespace dockgate::sidecar
