# SPDX-License-Identifier: Apache-2.0
# DLOCK_SANITIZE="address;undefined" or "thread": applied to the whole build (library, tests,
# examples) because a sanitizer runtime must see every object. TSan cannot share a build with ASan.
set(DLOCK_SANITIZE "" CACHE STRING "Sanitizers for the whole build: address;undefined, or thread")
if(DLOCK_SANITIZE)
  if("thread" IN_LIST DLOCK_SANITIZE AND "address" IN_LIST DLOCK_SANITIZE)
    message(FATAL_ERROR "DLOCK_SANITIZE: thread and address need separate builds")
  endif()
  string(REPLACE ";" "," _dlock_sanitizers "${DLOCK_SANITIZE}")
  add_compile_options(-fsanitize=${_dlock_sanitizers} -fno-omit-frame-pointer -fno-sanitize-recover=all)
  add_link_options(-fsanitize=${_dlock_sanitizers})
  message(STATUS "dlock: sanitizers ${_dlock_sanitizers}")
endif()
