# SPDX-License-Identifier: Apache-2.0
# Debian packages with CPack, from an installable build (`cpack -G DEB` in the build directory):
#   libdlock-dev   the library, headers, CMake package and dlock.pc (install component `dev`)
#   dlock          the command, tools/dlock (install component `command`, with DLOCK_BUILD_TOOLS)
# Configure with -DCMAKE_INSTALL_PREFIX=/usr so the library goes to Debian's multiarch directory.
# The command links dlock statically, so its Depends are its shared libraries' packages
# (dpkg-shlibdeps, from dpkg-dev); libdlock-dev needs what a program linking it needs.
set(CPACK_PACKAGE_NAME dlock)
set(CPACK_PACKAGE_VENDOR dlock)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "${PROJECT_DESCRIPTION}")
set(CPACK_PACKAGE_CONTACT "dlock <security@dlock.dev>" CACHE STRING "The Maintainer of the Debian packages")
set(CPACK_RESOURCE_FILE_LICENSE ${PROJECT_SOURCE_DIR}/LICENSE)
set(CPACK_PACKAGING_INSTALL_PREFIX ${CMAKE_INSTALL_PREFIX})
set(CPACK_PACKAGE_DIRECTORY ${PROJECT_BINARY_DIR}/packages)

set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_ALL dev)
if(DLOCK_BUILD_TOOLS)
  list(APPEND CPACK_COMPONENTS_ALL command)
endif()
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION libdevel)

set(CPACK_DEBIAN_DEV_PACKAGE_NAME libdlock-dev)
set(CPACK_DEBIAN_DEV_PACKAGE_SECTION libdevel)
# The synopsis of both is the project's description; CPack indents these bodies under it.
set(CPACK_DEBIAN_DEV_DESCRIPTION "Development files: the dlock library (static unless built with BUILD_SHARED_LIBS), its headers, the CMake package
(find_package(dlock) gives dlock::dlock) and dlock.pc for pkg-config.")
if(BUILD_SHARED_LIBS)
  # Not a Debian-style split into a runtime package: the .so ships here, and the command finds it.
  set(CPACK_DEBIAN_DEV_PACKAGE_SHLIBDEPS ON)
endif()
# A static dlock is linked with hiredis, OpenSSL and spdlog (which brings fmt); the CMake
# package's find_dependency calls and dlock.pc's Libs need their development files.
set(CPACK_DEBIAN_DEV_PACKAGE_DEPENDS "libhiredis-dev (>= 0.14), libssl-dev (>= 3), libspdlog-dev (>= 1:1.10)")
set(CPACK_DEBIAN_DEV_PACKAGE_RECOMMENDS "cmake (>= 3.21) | pkg-config")

set(CPACK_DEBIAN_COMMAND_PACKAGE_NAME dlock)
set(CPACK_DEBIAN_COMMAND_PACKAGE_SECTION utils)
set(CPACK_DEBIAN_COMMAND_DESCRIPTION "The dlock command runs a command under a distributed lock, as
flock(1) does on one host: dlock --uri redis://host:6379 nightly-report -- ./report.sh runs the
report on one host at a time.")
set(CPACK_DEBIAN_COMMAND_PACKAGE_SHLIBDEPS ON)

include(CPack)
