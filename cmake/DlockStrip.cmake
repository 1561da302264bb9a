# SPDX-License-Identifier: Apache-2.0
# dlock_install_strip(<file> <component> [STATIC]): on a stripping install (cpack with
# CPACK_STRIP_FILES, `cmake --install --strip`), strips the installed <file> (relative to the
# prefix) further as Debian's dh_strip does, after CMake's own strip: the .comment and .note
# sections go (the compiler's version strings: lintian's binary-has-unneeded-section), and a
# STATIC archive, which CMake never strips, loses its debug sections too and gets deterministic
# member headers. Call it after the install() of <file>: install rules run in order.
function(dlock_install_strip file component)
  cmake_parse_arguments(PARSE_ARGV 2 arg "STATIC" "" "")
  if(NOT CMAKE_STRIP)
    return()
  endif()
  set(options --remove-section=.comment --remove-section=.note)
  if(arg_STATIC)
    list(PREPEND options --strip-debug --enable-deterministic-archives)
  endif()
  install(CODE "
    if(CMAKE_INSTALL_DO_STRIP)
      execute_process(COMMAND \"${CMAKE_STRIP}\" ${options} \"\$ENV{DESTDIR}\${CMAKE_INSTALL_PREFIX}/${file}\"
        COMMAND_ERROR_IS_FATAL ANY)
    endif()" COMPONENT ${component})
endfunction()
