# SPDX-License-Identifier: Apache-2.0
# dlock_add_library(<target> <layer> SOURCES...): one layer, as an OBJECT library. Its objects go
# into the one library users link, dlock (dlock_add_dlock_library below); inside the build the
# layer keeps its own include directories, warnings and dependencies, so it compiles against only
# what it links. Layers link each other by target name (dlock_api, dlock_core, dlock_redis, ...):
# dlock::dlock is the whole library, which a layer must not link. <layer> is the layer's short name.
function(dlock_add_library target layer)
  add_library(${target} OBJECT ${ARGN})
  set_target_properties(${target} PROPERTIES POSITION_INDEPENDENT_CODE ON)
  if(EXISTS ${CMAKE_CURRENT_SOURCE_DIR}/include)
    target_include_directories(${target} PUBLIC $<BUILD_INTERFACE:${CMAKE_CURRENT_SOURCE_DIR}/include>)
  endif()
  if(EXISTS ${CMAKE_CURRENT_SOURCE_DIR}/src)
    target_include_directories(${target} PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/src)
  endif()
  dlock_set_warnings(${target})
  set_property(GLOBAL APPEND PROPERTY DLOCK_LAYERS ${target})
endfunction()

# dlock_add_dlock_library(): dlock (dlock::dlock), STATIC or SHARED per BUILD_SHARED_LIBS, made of
# every layer's objects. Installed, it carries the include directory and, PRIVATE (so a static
# dlock brings them into the consumer's link), what the layers link: hiredis, OpenSSL, spdlog,
# Threads.
# In the build tree it also passes on the layers' usage requirements (their include directories,
# the Redis layers' private headers for the tests), but never their objects, which only dlock
# links: an OBJECT library's objects go only into targets that link it directly.
function(dlock_add_dlock_library)
  get_property(layers GLOBAL PROPERTY DLOCK_LAYERS)
  get_property(include_dirs GLOBAL PROPERTY DLOCK_PUBLIC_INCLUDE_DIRS)
  set(objects "")
  set(build_interface "")
  foreach(layer IN LISTS layers)
    list(APPEND objects $<TARGET_OBJECTS:${layer}>)
    list(APPEND build_interface $<BUILD_INTERFACE:${layer}>)
  endforeach()
  add_library(dlock ${objects})
  add_library(dlock::dlock ALIAS dlock)
  set_target_properties(dlock PROPERTIES
    EXPORT_NAME dlock
    LINKER_LANGUAGE CXX
    VERSION ${PROJECT_VERSION}
    SOVERSION ${PROJECT_VERSION_MAJOR})
  target_compile_features(dlock PUBLIC cxx_std_17)
  foreach(dir IN LISTS include_dirs)
    target_include_directories(dlock PUBLIC $<BUILD_INTERFACE:${dir}>)
  endforeach()
  target_include_directories(dlock PUBLIC $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
  target_link_libraries(dlock
    PRIVATE hiredis::hiredis OpenSSL::SSL OpenSSL::Crypto spdlog::spdlog Threads::Threads
    INTERFACE ${build_interface} $<BUILD_INTERFACE:dlock_api> $<BUILD_INTERFACE:dlock_macros>)
endfunction()
