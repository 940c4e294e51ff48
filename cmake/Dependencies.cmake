# Third-party dependencies, all Debian packages (scripts/install-deps.sh installs them).
find_package(Threads REQUIRED)
find_package(nlohmann_json 3.11 REQUIRED)
find_package(spdlog REQUIRED)
find_package(yaml-cpp REQUIRED)           # target: yaml-cpp (0.7 has no namespaced alias)
find_package(msgpack-cxx QUIET)
if(NOT msgpack-cxx_FOUND)
  find_package(msgpack REQUIRED)          # Debian 12 4.1.3: target msgpackc-cxx
endif()
find_package(Boost 1.74 REQUIRED COMPONENTS system)
if(TROUPE_TESTS)
  find_package(GTest REQUIRED)
endif()

# CAF 0.17 ships no CMake config (TOOLCHAIN.md): imported targets by hand.
find_path(CAF_INCLUDE_DIR caf/all.hpp REQUIRED)
find_library(CAF_CORE_LIB caf_core REQUIRED)
find_library(CAF_IO_LIB caf_io REQUIRED)
add_library(caf::core SHARED IMPORTED)
set_target_properties(caf::core PROPERTIES IMPORTED_LOCATION ${CAF_CORE_LIB}
                      INTERFACE_INCLUDE_DIRECTORIES ${CAF_INCLUDE_DIR})
add_library(caf::io SHARED IMPORTED)
set_target_properties(caf::io PROPERTIES IMPORTED_LOCATION ${CAF_IO_LIB}
                      INTERFACE_LINK_LIBRARIES caf::core)
# The control plane's TLS (net/control/cluster_tls.h): CAF's openssl module over OpenSSL 3.
find_package(OpenSSL 3 REQUIRED)
find_library(CAF_OPENSSL_LIB caf_openssl REQUIRED)
add_library(caf::openssl SHARED IMPORTED)
set_target_properties(caf::openssl PROPERTIES IMPORTED_LOCATION ${CAF_OPENSSL_LIB}
                      INTERFACE_LINK_LIBRARIES "caf::io;OpenSSL::SSL;OpenSSL::Crypto")

find_package(PkgConfig REQUIRED)
pkg_check_modules(UCX IMPORTED_TARGET ucx)
