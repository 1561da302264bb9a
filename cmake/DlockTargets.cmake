# dlock_add_library(<name> <export-name> SOURCES...): one library per layer, honouring
# BUILD_SHARED_LIBS, with the alias dlock::<export-name> used everywhere, in-tree too.
function(dlock_add_library target export_name)
  add_library(${target} ${ARGN})
  add_library(dlock::${export_name} ALIAS ${target})
  string(REPLACE "_" "-" output_name "${target}")
  set_target_properties(${target} PROPERTIES
    EXPORT_NAME ${export_name}
    OUTPUT_NAME ${output_name}
    POSITION_INDEPENDENT_CODE ON
    VERSION ${PROJECT_VERSION}
    SOVERSION ${PROJECT_VERSION_MAJOR})
  if(EXISTS ${CMAKE_CURRENT_SOURCE_DIR}/include)
    target_include_directories(${target} PUBLIC
      $<BUILD_INTERFACE:${CMAKE_CURRENT_SOURCE_DIR}/include>
      $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
  endif()
  if(EXISTS ${CMAKE_CURRENT_SOURCE_DIR}/src)
    target_include_directories(${target} PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/src)
  endif()
  dlock_set_warnings(${target})
  set_property(GLOBAL APPEND PROPERTY DLOCK_INSTALL_TARGETS ${target})
endfunction()
