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
  BOOST_BEAST_USE_STD_STRING_VIEW)
