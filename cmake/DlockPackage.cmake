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
# Lines of at most 79 characters (lintian: extended-description-line-too-long).
set(CPACK_DEBIAN_DEV_DESCRIPTION "Development files: the dlock library (static unless built with
BUILD_SHARED_LIBS), its headers, the CMake package (find_package(dlock) gives
dlock::dlock) and dlock.pc for pkg-config.")
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
# CPack indents each line by one space; the command's line has one more, so it shows as it is.
set(CPACK_DEBIAN_COMMAND_DESCRIPTION "The dlock command runs a command under a distributed lock, as flock(1)
does on one host:
 dlock --uri redis://host:6379 nightly-report -- ./report.sh
runs the report on one host at a time; man dlock tells the rest.")
set(CPACK_DEBIAN_COMMAND_PACKAGE_SHLIBDEPS ON)
# As Debian wants them (lintian checks): the command stripped (CMake strips no static library),
# the control files 0644.
set(CPACK_STRIP_FILES ON)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)

# /usr/share/doc/<package>/: the machine-readable copyright file and the Debian changelog
# (gzip -9n, as Debian policy asks), in both packages. The dlock package's man page is installed
# beside the command (tools/dlock/CMakeLists.txt).
include(DlockDebianChangelog)
include(DlockGzip)
dlock_debian_changelog(${PROJECT_BINARY_DIR}/debian/changelog "${CPACK_PACKAGE_CONTACT}")
dlock_gzip(${PROJECT_BINARY_DIR}/debian/changelog dlock_changelog_gz)
set(components dev)
set(packages libdlock-dev)
if(DLOCK_BUILD_TOOLS)
  list(APPEND components command)
  list(APPEND packages dlock)
endif()
foreach(component package IN ZIP_LISTS components packages)
  install(FILES cmake/debian/copyright ${PROJECT_BINARY_DIR}/debian/changelog.gz
    DESTINATION ${CMAKE_INSTALL_DATAROOTDIR}/doc/${package} COMPONENT ${component})
  # The lintian tags that stay, each with its reason (cmake/debian/<package>.lintian-overrides).
  if(EXISTS ${PROJECT_SOURCE_DIR}/cmake/debian/${package}.lintian-overrides)
    install(FILES cmake/debian/${package}.lintian-overrides RENAME ${package}
      DESTINATION ${CMAKE_INSTALL_DATAROOTDIR}/lintian/overrides COMPONENT ${component})
  endif()
endforeach()

include(CPack)
