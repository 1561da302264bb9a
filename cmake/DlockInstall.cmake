# Installs headers, libraries, the CMake package (find_package(dlock) gives dlock::dlock, with one
# target per layer) and a pkg-config file (dlock.pc). Both are relocatable: they locate the prefix
# from where they are installed, so `cmake --install build --prefix <anywhere>` works.
#
#   <prefix>/include/dlock/...                  every layer's public headers (not api/internal)
#   <prefix>/<libdir>/libdlock-*.a|.so          one library per layer
#   <prefix>/<libdir>/cmake/dlock/              dlockConfig.cmake, dlockConfigVersion.cmake,
#                                               dlockTargets*.cmake, FindHiredis.cmake
#   <prefix>/<libdir>/pkgconfig/dlock.pc
#   <prefix>/bin/dlock                          the command (examples/cli), when examples are built
include(CMakePackageConfigHelpers)
set(DLOCK_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/dlock)
set(DLOCK_PKGCONFIG_DIR ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
get_property(dlock_targets GLOBAL PROPERTY DLOCK_INSTALL_TARGETS)

# A shared dlock library finds the others it links beside itself, wherever the prefix is: a
# consumer's RUNPATH covers only the libraries it links directly.
foreach(target IN LISTS dlock_targets)
  get_target_property(type ${target} TYPE)
  get_target_property(rpath ${target} INSTALL_RPATH)
  if(type STREQUAL "SHARED_LIBRARY" AND NOT rpath)
    set_target_properties(${target} PROPERTIES INSTALL_RPATH "$ORIGIN")
  endif()
endforeach()

# The targets carry their include directory as $<INSTALL_INTERFACE:include> already.
install(TARGETS ${dlock_targets} EXPORT dlockTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
get_property(dlock_include_dirs GLOBAL PROPERTY DLOCK_PUBLIC_INCLUDE_DIRS)
foreach(dir IN LISTS dlock_include_dirs)
  install(DIRECTORY ${dir}/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
endforeach()

# CMake package.
install(EXPORT dlockTargets NAMESPACE dlock:: DESTINATION ${DLOCK_CMAKE_DIR})
if(BUILD_SHARED_LIBS)
  set(DLOCK_PACKAGE_STATIC OFF)
else()
  set(DLOCK_PACKAGE_STATIC ON)
endif()
configure_package_config_file(cmake/dlockConfig.cmake.in
  ${PROJECT_BINARY_DIR}/dlockConfig.cmake INSTALL_DESTINATION ${DLOCK_CMAKE_DIR})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/dlockConfigVersion.cmake
  COMPATIBILITY SameMajorVersion)
install(FILES ${PROJECT_BINARY_DIR}/dlockConfig.cmake ${PROJECT_BINARY_DIR}/dlockConfigVersion.cmake
  cmake/FindHiredis.cmake DESTINATION ${DLOCK_CMAKE_DIR})

# pkg-config. Libs lists dlock's libraries dependents first: the reverse of the order the layers
# registered them, as each layer is added after what it links.
set(dlock_pc_libs "")
set(dlock_pc_deps "")
foreach(target IN LISTS dlock_targets)
  get_target_property(type ${target} TYPE)
  if(type STREQUAL "STATIC_LIBRARY" OR type STREQUAL "SHARED_LIBRARY")
    get_target_property(output_name ${target} OUTPUT_NAME)
    list(PREPEND dlock_pc_libs "-l${output_name}")
    get_target_property(links ${target} LINK_LIBRARIES)
    if(links)
      list(APPEND dlock_pc_deps ${links})
    endif()
  endif()
endforeach()

# The link flags of CMake link items: imported targets by their files (-L/-l for a shared
# library, the path of a static one) and, depth first, what they link in turn; plain flags and
# names as they are. dlock's own targets and build-only items ($<BUILD_INTERFACE:...>) add nothing.
function(dlock_pc_link_flags out_var)
  set(flags "")
  set(pending ${ARGN})
  set(seen "")
  while(pending)
    list(POP_FRONT pending item)
    if(item MATCHES "^\\$<LINK_ONLY:(.*)>$")
      set(item "${CMAKE_MATCH_1}")
    endif()
    if(item STREQUAL "" OR item MATCHES "^\\$<" OR item IN_LIST seen)
      continue()
    endif()
    list(APPEND seen "${item}")
    if(TARGET "${item}")
      get_target_property(imported "${item}" IMPORTED)
      if(NOT imported)
        continue()
      endif()
      get_target_property(type "${item}" TYPE)
      if(NOT type STREQUAL "INTERFACE_LIBRARY")
        get_target_property(location "${item}" LOCATION)
        get_filename_component(dir "${location}" DIRECTORY)
        get_filename_component(name "${location}" NAME)
        if(name MATCHES "^lib(.+)\\.so(\\.[0-9.]+)?$")
          if(NOT dir IN_LIST CMAKE_CXX_IMPLICIT_LINK_DIRECTORIES)
            list(APPEND flags "-L${dir}")
          endif()
          list(APPEND flags "-l${CMAKE_MATCH_1}")
        else()
          list(APPEND flags "${location}")
        endif()
      endif()
      get_target_property(links "${item}" INTERFACE_LINK_LIBRARIES)
      if(links)
        list(PREPEND pending ${links})
      endif()
    elseif(item MATCHES "^-")
      list(APPEND flags "${item}")
    elseif(IS_ABSOLUTE "${item}")
      list(APPEND flags "${item}")
    else()
      list(APPEND flags "-l${item}")
    endif()
  endwhile()
  list(REMOVE_DUPLICATES flags)
  string(JOIN " " joined ${flags})
  set(${out_var} "${joined}" PARENT_SCOPE)
endfunction()
dlock_pc_link_flags(dlock_pc_dep_flags ${dlock_pc_deps})

string(JOIN " " DLOCK_PC_LIBS ${dlock_pc_libs})
if(BUILD_SHARED_LIBS)
  # The shared libraries record their own dependencies.
  set(DLOCK_PC_LIBS_PRIVATE "${dlock_pc_dep_flags}")
else()
  # A static dlock needs its dependencies on the consumer's link line, with a plain --libs.
  string(APPEND DLOCK_PC_LIBS " ${dlock_pc_dep_flags}")
  set(DLOCK_PC_LIBS_PRIVATE "")
endif()
string(STRIP "${DLOCK_PC_LIBS}" DLOCK_PC_LIBS)

# prefix: relative to the .pc file's own directory (pkg-config's ${pcfiledir}), unless the
# install directories are absolute.
if(IS_ABSOLUTE "${CMAKE_INSTALL_LIBDIR}" OR IS_ABSOLUTE "${CMAKE_INSTALL_INCLUDEDIR}")
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
install(FILES ${PROJECT_BINARY_DIR}/dlock.pc DESTINATION ${DLOCK_PKGCONFIG_DIR})
