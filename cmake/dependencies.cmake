# Every dependency comes from a Debian 12 package (scripts/install-deps.sh).
find_package(Threads REQUIRED)
find_package(Boost 1.81 REQUIRED)
find_package(OpenSSL REQUIRED)
find_package(spdlog REQUIRED)
find_package(PkgConfig REQUIRED)
pkg_check_modules(simdjson REQUIRED IMPORTED_TARGET simdjson)
pkg_check_modules(libarchive REQUIRED IMPORTED_TARGET libarchive)

# proxy/src/readiness.cpp reads private members of Asio's epoll reactor as Boost 1.81.0 has
# them, to save two system calls per request (proxy/src/readiness.hpp). With any other Boost
# the portable path (readiness_portable.cpp, public Asio only) is built instead: a Boost
# upgrade costs speed, never the build. ON by default only with the Boost it was written
# against; asked for with another, it is not built (a warning says so).
# DOCKGATE_ASIO_REACTOR_PEEK_BUILT says which path is built (proxy/, tests/proxy).
set(dockgate_reactor_peek_boost 1.81.0)
if(Boost_VERSION VERSION_EQUAL dockgate_reactor_peek_boost)
  set(dockgate_reactor_peek_default ON)
else()
  set(dockgate_reactor_peek_default OFF)
  message(STATUS "dockgate: Boost ${Boost_VERSION}, not ${dockgate_reactor_peek_boost}: "
                 "the gate's portable readiness path is built (two system calls more per request)")
endif()
option(DOCKGATE_ASIO_REACTOR_PEEK
       "Read Asio's epoll reactor state (Boost ${dockgate_reactor_peek_boost} only) to save system calls"
       ${dockgate_reactor_peek_default})
set(DOCKGATE_ASIO_REACTOR_PEEK_BUILT ${DOCKGATE_ASIO_REACTOR_PEEK})
if(DOCKGATE_ASIO_REACTOR_PEEK AND NOT Boost_VERSION VERSION_EQUAL dockgate_reactor_peek_boost)
  message(WARNING "DOCKGATE_ASIO_REACTOR_PEEK is for Boost ${dockgate_reactor_peek_boost}, "
                  "found ${Boost_VERSION}: the portable readiness path is built instead")
  set(DOCKGATE_ASIO_REACTOR_PEEK_BUILT OFF)
elseif(NOT DOCKGATE_ASIO_REACTOR_PEEK)
  message(STATUS "dockgate: DOCKGATE_ASIO_REACTOR_PEEK is OFF: the gate's portable readiness path is built")
endif()

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
