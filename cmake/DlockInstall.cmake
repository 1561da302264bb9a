# SPDX-License-Identifier: Apache-2.0
# Installs the headers, the library, the CMake package (find_package(dlock) gives dlock::dlock) and
# a pkg-config file (dlock.pc). Both are
# relocatable: they locate the prefix from where they are installed, so
# `cmake --install build --prefix <anywhere>` works (dlock.pc of a build for /usr, the Debian
# packages', names /usr itself).
#
#   <prefix>/include/dlock/...                  every layer's public headers (not api/internal)
#   <prefix>/<libdir>/libdlock.a|.so*           the library (static or shared per BUILD_SHARED_LIBS)
#   <prefix>/<libdir>/cmake/dlock/              dlockConfig.cmake, dlockConfigVersion.cmake,
#                                               dlockTargets*.cmake, FindHiredis.cmake
#   <prefix>/<libdir>/pkgconfig/dlock.pc
#   <prefix>/bin/dlock                          the command (tools/dlock), with DLOCK_BUILD_TOOLS
# Install components: `dev` (all but the command) and `command`; DlockPackage.cmake makes a Debian
# package of each.
include(CMakePackageConfigHelpers)
set(DLOCK_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/dlock)
set(DLOCK_PKGCONFIG_DIR ${CMAKE_INSTALL_LIBDIR}/pkgconfig)

# The target carries its include directory as $<INSTALL_INTERFACE:include> already.
install(TARGETS dlock EXPORT dlockTargets COMPONENT dev
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
include(DlockStrip)
if(BUILD_SHARED_LIBS)
  dlock_install_strip(${CMAKE_INSTALL_LIBDIR}/$<TARGET_FILE_NAME:dlock> dev)
else()
  dlock_install_strip(${CMAKE_INSTALL_LIBDIR}/$<TARGET_FILE_NAME:dlock> dev STATIC)
endif()
get_property(dlock_include_dirs GLOBAL PROPERTY DLOCK_PUBLIC_INCLUDE_DIRS)
foreach(dir IN LISTS dlock_include_dirs)
  install(DIRECTORY ${dir}/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} COMPONENT dev)
endforeach()

# CMake package.
install(EXPORT dlockTargets NAMESPACE dlock:: DESTINATION ${DLOCK_CMAKE_DIR} COMPONENT dev)
if(BUILD_SHARED_LIBS)
  set(DLOCK_PACKAGE_STATIC OFF)
else()
  set(DLOCK_PACKAGE_STATIC ON)
endif()
configure_package_config_file(cmake/dlockConfig.cmake.in
  ${PROJECT_BINARY_DIR}/dlockConfig.cmake INSTALL_DESTINATION ${DLOCK_CMAKE_DIR})
# The version policy (CHANGELOG.md): before 1.0 a minor release may break the API, so
# find_package(dlock 0.2) accepts 0.2.x only; from 1.0, any later release of the same major.
if(PROJECT_VERSION_MAJOR EQUAL 0)
  set(compatibility SameMinorVersion)
else()
  set(compatibility SameMajorVersion)
endif()
write_basic_package_version_file(${PROJECT_BINARY_DIR}/dlockConfigVersion.cmake
  COMPATIBILITY ${compatibility})
install(FILES ${PROJECT_BINARY_DIR}/dlockConfig.cmake ${PROJECT_BINARY_DIR}/dlockConfigVersion.cmake
  cmake/FindHiredis.cmake DESTINATION ${DLOCK_CMAKE_DIR} COMPONENT dev)

# pkg-config. `pkg-config --cflags --libs dlock` links either kind of dlock without --static, and
# its Cflags are dlock's include directory alone: no installed header includes hiredis or spdlog,
# and their flags (-I/usr/include/hiredis, -DSPDLOG_COMPILED_LIB, ...) would clash with a
# consumer's own spdlog. Naming them in Requires.private would not keep those out: pkg-config
# (pkgconf) adds Requires.private modules' Cflags to every --cflags. So their link flags, taken
# from pkg-config now, go in Libs (a static dlock needs them at every link) or Libs.private (a
# shared one links them itself), and the modules are named nowhere.
find_package(PkgConfig QUIET)
if(PKG_CONFIG_FOUND)
  pkg_check_modules(DLOCK_PC_DEPS QUIET hiredis spdlog libssl libcrypto)
endif()
foreach(field REQUIRES REQUIRES_PRIVATE LIBS LIBS_PRIVATE)
  set(DLOCK_PC_${field} "")
endforeach()
if(BUILD_SHARED_LIBS)
  set(suffix _PRIVATE)  # a shared dlock links its dependencies itself: for --static only
else()
  set(suffix "")        # a static dlock's consumers link them too, with or without --static
endif()
if(DLOCK_PC_DEPS_FOUND)
  set(dep_libs "")
  foreach(dir IN LISTS DLOCK_PC_DEPS_LIBRARY_DIRS)
    if(NOT dir IN_LIST CMAKE_CXX_IMPLICIT_LINK_DIRECTORIES)
      list(APPEND dep_libs "-L${dir}")
    endif()
  endforeach()
  list(TRANSFORM DLOCK_PC_DEPS_LIBRARIES PREPEND "-l" OUTPUT_VARIABLE dep_names)
  list(APPEND dep_libs ${dep_names})
  list(REMOVE_DUPLICATES dep_libs)
  list(JOIN dep_libs " " DLOCK_PC_LIBS${suffix})
else()
  # No pkg-config here, or no .pc file of a dependency: name the modules, and their Cflags come
  # along.
  message(STATUS "dlock: dlock.pc names hiredis, spdlog and OpenSSL as modules (pkg-config could not list their libraries)")
  set(DLOCK_PC_REQUIRES${suffix} "hiredis, spdlog, libssl, libcrypto")
endif()
if(DLOCK_PC_LIBS)
  string(PREPEND DLOCK_PC_LIBS " ")  # after -ldlock in Libs
endif()

# prefix: relative to the .pc file's own directory (pkg-config's ${pcfiledir}), unless the
# install directories are absolute or the prefix is the system's /usr: there a package puts it
# (cpack), and pkg-config prints plain paths (none for /usr/include, a system directory) instead
# of -I/usr/lib/x86_64-linux-gnu/pkgconfig/../../../include.
if(IS_ABSOLUTE "${CMAKE_INSTALL_LIBDIR}" OR IS_ABSOLUTE "${CMAKE_INSTALL_INCLUDEDIR}"
   OR CMAKE_INSTALL_PREFIX STREQUAL "/usr")
  set(DLOCK_PC_PREFIX "${CMAKE_INSTALL_PREFIX}")
  set(DLOCK_PC_LIBDIR "${CMAKE_INSTALL_FULL_LIBDIR}")
  set(DLOCK_PC_INCLUDEDIR "${CMAKE_INSTALL_FULL_INCLUDEDIR}")
else()
  file(RELATIVE_PATH pc_to_prefix "/root/${DLOCK_PKGCONFIG_DIR}" "/root")
  string(REGEX REPLACE "/$" "" pc_to_prefix "${pc_to_prefix}")
  set(DLOCK_PC_PREFIX "\${pcfiledir}/${pc_to_prefix}")
  set(DLOCK_PC_LIBDIR "\${prefix}/${CMAKE_INSTALL_LIBDIR}")
  set(DLOCK_PC_INCLUDEDIR "\${prefix}/${CMAKE_INSTALL_INCLUDEDIR}")
endif()
configure_file(cmake/dlock.pc.in ${PROJECT_BINARY_DIR}/dlock.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/dlock.pc DESTINATION ${DLOCK_PKGCONFIG_DIR} COMPONENT dev)

include(DlockPackage)
