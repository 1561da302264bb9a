# SPDX-License-Identifier: Apache-2.0
# dlock_gzip(<file> <target>): <file>.gz, made by the custom target <target> (built by `all`), as
# Debian wants an installed man page or changelog: gzip -9n, the best compression, and neither
# the file's name nor a time stamp in it, so two builds make the same bytes.
function(dlock_gzip file target)
  find_program(DLOCK_GZIP gzip REQUIRED)
  add_custom_command(OUTPUT ${file}.gz
    COMMAND ${DLOCK_GZIP} -9nkf ${file}
    DEPENDS ${file}
    COMMENT "Compressing ${file}"
    VERBATIM)
  add_custom_target(${target} ALL DEPENDS ${file}.gz)
endfunction()
