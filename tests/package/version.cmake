# SPDX-License-Identifier: Apache-2.0
# The installed dlockConfigVersion.cmake keeps the version policy (CHANGELOG.md): before 1.0 a
# minor release may break the API, so a request for 0.2 accepts 0.2.x and nothing else; from 1.0,
# the same major. The installed file is evaluated as find_package would, for this version and,
# with its version rewritten, for the next minor and the next major.
#   cmake -DFILE=<prefix>/lib/cmake/dlock/dlockConfigVersion.cmake -DVERSION=0.2.0 -P version.cmake
file(READ "${FILE}" installed)
string(REGEX MATCH "^([0-9]+)\\.([0-9]+)\\.([0-9]+)$" parsed "${VERSION}")
set(major ${CMAKE_MATCH_1})
set(minor ${CMAKE_MATCH_2})
math(EXPR next_minor "${minor} + 1")
math(EXPR next_major "${major} + 1")

# compatible(<installed version> <requested version> <expected TRUE|FALSE>)
function(compatible version requested expected)
  string(REPLACE "\"${VERSION}\"" "\"${version}\"" text "${installed}")
  set(file "${CMAKE_CURRENT_BINARY_DIR}/dlockConfigVersion-${version}.cmake")
  file(WRITE "${file}" "${text}")
  set(PACKAGE_FIND_VERSION "${requested}")
  string(REGEX MATCH "^([0-9]+)\\.([0-9]+)" ignored "${requested}")
  set(PACKAGE_FIND_VERSION_MAJOR ${CMAKE_MATCH_1})
  set(PACKAGE_FIND_VERSION_MINOR ${CMAKE_MATCH_2})
  set(PACKAGE_FIND_VERSION_MIN "${requested}")
  set(PACKAGE_FIND_VERSION_MIN_MAJOR ${CMAKE_MATCH_1})
  set(PACKAGE_FIND_VERSION_MIN_MINOR ${CMAKE_MATCH_2})
  set(PACKAGE_FIND_VERSION_COUNT 2)
  set(PACKAGE_FIND_VERSION_RANGE FALSE)
  set(CMAKE_SIZEOF_VOID_P 8)
  include("${file}")
  file(REMOVE "${file}")
  if(NOT "${PACKAGE_VERSION_COMPATIBLE}" STREQUAL "${expected}")
    message(FATAL_ERROR "find_package(dlock ${requested}) with dlock ${version} installed: "
                        "compatible is '${PACKAGE_VERSION_COMPATIBLE}', the policy says ${expected}")
  endif()
  message(STATUS "dlock ${version} for a request of ${requested}: compatible ${expected}")
endfunction()

compatible(${VERSION} ${major}.${minor} TRUE)
compatible(${major}.${minor}.99 ${major}.${minor} TRUE)
if(major EQUAL 0)
  compatible(${major}.${next_minor}.0 ${major}.${minor} FALSE)   # 0.3 may break what 0.2 had
  if(minor GREATER 0)
    compatible(${VERSION} 0.0 FALSE)
  endif()
else()
  compatible(${major}.${next_minor}.0 ${major}.${minor} TRUE)
endif()
compatible(${next_major}.0.0 ${major}.${minor} FALSE)
