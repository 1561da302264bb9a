# Installs headers, libraries and the CMake package: find_package(dlock) gives dlock::dlock.
include(CMakePackageConfigHelpers)
set(DLOCK_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/dlock)
get_property(dlock_targets GLOBAL PROPERTY DLOCK_INSTALL_TARGETS)
install(TARGETS ${dlock_targets} EXPORT dlockTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
get_property(dlock_include_dirs GLOBAL PROPERTY DLOCK_PUBLIC_INCLUDE_DIRS)
foreach(dir IN LISTS dlock_include_dirs)
  install(DIRECTORY ${dir}/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
endforeach()
install(EXPORT dlockTargets NAMESPACE dlock:: DESTINATION ${DLOCK_CMAKE_DIR})
configure_package_config_file(cmake/dlockConfig.cmake.in
  ${PROJECT_BINARY_DIR}/dlockConfig.cmake INSTALL_DESTINATION ${DLOCK_CMAKE_DIR})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/dlockConfigVersion.cmake
  COMPATIBILITY SameMajorVersion)
install(FILES ${PROJECT_BINARY_DIR}/dlockConfig.cmake ${PROJECT_BINARY_DIR}/dlockConfigVersion.cmake
  cmake/FindHiredis.cmake DESTINATION ${DLOCK_CMAKE_DIR})
