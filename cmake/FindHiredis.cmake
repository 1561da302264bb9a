# SPDX-License-Identifier: Apache-2.0
# Provides hiredis::hiredis for every hiredis we meet: >= 1.0 exports the target itself;
# Debian's 0.14.1 HiredisConfig.cmake only sets variables, so fall back to find_path/find_library.
if(TARGET hiredis::hiredis)
  set(Hiredis_FOUND TRUE)
  return()
endif()
find_package(hiredis CONFIG QUIET)
if(TARGET hiredis::hiredis)
  set(Hiredis_FOUND TRUE)
  return()
endif()
find_path(HIREDIS_INCLUDE_DIR hiredis/hiredis.h)
find_library(HIREDIS_LIBRARY NAMES hiredis)
include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(Hiredis REQUIRED_VARS HIREDIS_LIBRARY HIREDIS_INCLUDE_DIR)
if(Hiredis_FOUND AND NOT TARGET hiredis::hiredis)
  add_library(hiredis::hiredis UNKNOWN IMPORTED)
  set_target_properties(hiredis::hiredis PROPERTIES
    IMPORTED_LOCATION "${HIREDIS_LIBRARY}"
    INTERFACE_INCLUDE_DIRECTORIES "${HIREDIS_INCLUDE_DIR}")
endif()
mark_as_advanced(HIREDIS_INCLUDE_DIR HIREDIS_LIBRARY)
