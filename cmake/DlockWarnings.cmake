# SPDX-License-Identifier: Apache-2.0
# dlock_set_warnings(<target>): the project's warning set, PRIVATE only, so users' builds never
# inherit our flags. DLOCK_WARNINGS_AS_ERRORS turns them into errors (ON in CI).
function(dlock_set_warnings target)
  if(CMAKE_CXX_COMPILER_ID MATCHES "GNU|Clang")
    target_compile_options(${target} PRIVATE -Wall -Wextra -Wpedantic -Wconversion -Wshadow)
    if(DLOCK_WARNINGS_AS_ERRORS)
      target_compile_options(${target} PRIVATE -Werror)
    endif()
  endif()
endfunction()
