# SPDX-License-Identifier: Apache-2.0
# Installs the build in BUILD_DIR into PREFIX (emptied first, with the consumer build trees named
# in CLEAN), then checks what was installed: the package files are all there, the library is one
# file (libdlock.a; or, when SHARED, libdlock.so.VERSION and its links .so.SOVERSION and .so), and no installed text
# names the source or build tree, or the build-only dlock_internal.
#   cmake -DBUILD_DIR=... -DSOURCE_DIR=... -DPREFIX=... -DLIBDIR=lib -DINCLUDEDIR=include
#         [-DSHARED=ON -DVERSION=0.1.0 -DSOVERSION=0] [-DCONFIG=...] [-DCLEAN=a;b]
#         [-DDATAROOTDIR=share [-DTOOLS=ON]] -P install.cmake
foreach(var BUILD_DIR SOURCE_DIR PREFIX LIBDIR INCLUDEDIR)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "install.cmake: ${var} is not set")
  endif()
endforeach()

get_filename_component(package_build_dir "${PREFIX}" DIRECTORY)
file(REMOVE_RECURSE "${PREFIX}")
foreach(dir IN LISTS CLEAN)
  file(REMOVE_RECURSE "${package_build_dir}/${dir}")
endforeach()

unset(ENV{DESTDIR})
set(config_args "")
if(CONFIG)
  set(config_args --config "${CONFIG}")
endif()
execute_process(COMMAND "${CMAKE_COMMAND}" --install "${BUILD_DIR}" --prefix "${PREFIX}" ${config_args}
  RESULT_VARIABLE result OUTPUT_QUIET)
if(NOT result EQUAL 0)
  message(FATAL_ERROR "cmake --install ${BUILD_DIR} --prefix ${PREFIX} failed: ${result}")
endif()

foreach(file
    ${INCLUDEDIR}/dlock/dlock.h
    ${INCLUDEDIR}/dlock/ILock.h
    ${INCLUDEDIR}/dlock/connect.h
    ${INCLUDEDIR}/dlock/core/LockBuilder.h
    ${INCLUDEDIR}/dlock/macros.h
    ${LIBDIR}/cmake/dlock/dlockConfig.cmake
    ${LIBDIR}/cmake/dlock/dlockConfigVersion.cmake
    ${LIBDIR}/cmake/dlock/dlockTargets.cmake
    ${LIBDIR}/cmake/dlock/FindHiredis.cmake
    ${LIBDIR}/pkgconfig/dlock.pc)
  if(NOT EXISTS "${PREFIX}/${file}")
    message(FATAL_ERROR "not installed: ${file}")
  endif()
endforeach()

# What the Debian packages need of the install too: each package's copyright file and changelog,
# and the command's man page (with TOOLS, when the command is installed).
if(DEFINED DATAROOTDIR)
  set(package_files ${DATAROOTDIR}/doc/libdlock-dev/copyright ${DATAROOTDIR}/doc/libdlock-dev/changelog.gz)
  if(TOOLS)
    list(APPEND package_files ${DATAROOTDIR}/doc/dlock/copyright ${DATAROOTDIR}/doc/dlock/changelog.gz
      ${DATAROOTDIR}/man/man1/dlock.1.gz)
  endif()
  foreach(file IN LISTS package_files)
    if(NOT EXISTS "${PREFIX}/${file}")
      message(FATAL_ERROR "not installed: ${file}")
    endif()
  endforeach()
endif()

# One library: every library file under the prefix is libdlock.a, or libdlock.so* of one version.
file(GLOB_RECURSE libraries LIST_DIRECTORIES false RELATIVE "${PREFIX}" "${PREFIX}/*.a" "${PREFIX}/*.so*")
if(SHARED)
  set(expected ${LIBDIR}/libdlock.so ${LIBDIR}/libdlock.so.${SOVERSION} ${LIBDIR}/libdlock.so.${VERSION})
else()
  set(expected ${LIBDIR}/libdlock.a)
endif()
list(SORT libraries)
list(SORT expected)
if(NOT libraries STREQUAL expected)
  message(FATAL_ERROR "installed libraries: '${libraries}'; expected exactly '${expected}'")
endif()
if(SHARED)
  foreach(link libdlock.so libdlock.so.${SOVERSION})
    file(REAL_PATH "${PREFIX}/${LIBDIR}/${link}" target)
    file(REAL_PATH "${PREFIX}/${LIBDIR}/libdlock.so.${VERSION}" library)
    if(NOT IS_SYMLINK "${PREFIX}/${LIBDIR}/${link}" OR NOT target STREQUAL library)
      message(FATAL_ERROR "${LIBDIR}/${link} is not a link to libdlock.so.${VERSION}")
    endif()
  endforeach()
endif()

if(EXISTS "${PREFIX}/${INCLUDEDIR}/dlock/detail")
  message(FATAL_ERROR "the build-only headers (api/internal, dlock/detail/) were installed")
endif()

file(GLOB_RECURSE texts "${PREFIX}/*.cmake" "${PREFIX}/*.pc" "${PREFIX}/*.h")
foreach(file IN LISTS texts)
  file(READ "${file}" content)
  foreach(needle "${SOURCE_DIR}" "${BUILD_DIR}" "dlock_internal")
    string(FIND "${content}" "${needle}" at)
    if(NOT at EQUAL -1)
      message(FATAL_ERROR "${file} contains '${needle}'")
    endif()
  endforeach()
endforeach()
list(LENGTH texts count)
message(STATUS "installed into ${PREFIX}; ${count} package files checked")
