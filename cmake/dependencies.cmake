# Every dependency comes from a Debian 12 package (scripts/install-deps.sh).
find_package(Threads REQUIRED)
find_package(Boost 1.81 EXACT REQUIRED)
find_package(OpenSSL REQUIRED)
find_package(spdlog REQUIRED)
find_package(PkgConfig REQUIRED)
pkg_check_modules(simdjson REQUIRED IMPORTED_TARGET simdjson)
pkg_check_modules(libarchive REQUIRED IMPORTED_TARGET libarchive)

# Asio and Beast are compiled once, in proxy/src/asio_beast.cpp, not in every
# translation unit that includes them (2 cores: build time matters).
add_library(dockgate_asio INTERFACE)
target_link_libraries(dockgate_asio INTERFACE Boost::headers Threads::Threads OpenSSL::SSL OpenSSL::Crypto)
target_compile_definitions(dockgate_asio INTERFACE
  BOOST_ASIO_SEPARATE_COMPILATION
  BOOST_BEAST_SEPARATE_COMPILATION
  BOOST_ASIO_NO_DEPRECATED
  BOOST_BEAST_USE_STD_STRING_VIEW
  # Asio keeps freed coroutine frames and handlers for reuse, per thread and per kind, in
  # this many slots (its default: 2). A request nests more frames than that (the
  # connection's loop, the request, a stage, a write); with 2 slots a ping allocated about
  # 8 per request, with 8 about 5. The rest were frames over the 1020 bytes Asio keeps at
  # most, which also throw a kept one out when made: the request path keeps its frames
  # under that (proxy/src/held_streams.cpp, upstream_lookups.cpp), and then none is made.
  BOOST_ASIO_RECYCLING_ALLOCATOR_CACHE_SIZE=8)
