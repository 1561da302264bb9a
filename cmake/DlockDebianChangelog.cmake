# SPDX-License-Identifier: Apache-2.0
# dlock_debian_changelog(<out> <maintainer>): writes the packages' Debian changelog to <out>, not
# compressed. The packages are native (a version without a Debian revision), so Debian policy and
# lintian want it as /usr/share/doc/<package>/changelog.gz, in dpkg's changelog format: here one
# entry per release heading of CHANGELOG.md ("## [0.2.0] - 2026-11-26"), newest first, each
# pointing at CHANGELOG.md for the changes. A version that CHANGELOG.md has not released yet gets
# an UNRELEASED entry first, dated by the build (SOURCE_DATE_EPOCH when set, as CMake reads it).

# _dlock_rfc2822_date(<out> <y> <m> <d>): "Thu, 26 Nov 2026 00:00:00 +0000", the weekday from the
# day count since 1970-01-01 (a Thursday; Howard Hinnant's days_from_civil).
function(_dlock_rfc2822_date out y m d)
  set(march_year ${y})  # the count's year starts in March
  if(m LESS_EQUAL 2)
    math(EXPR march_year "${y} - 1")
  endif()
  math(EXPR era "${march_year} / 400")
  math(EXPR yoe "${march_year} - ${era} * 400")
  if(m GREATER 2)
    math(EXPR mp "${m} - 3")
  else()
    math(EXPR mp "${m} + 9")
  endif()
  math(EXPR doy "(153 * ${mp} + 2) / 5 + ${d} - 1")
  math(EXPR doe "${yoe} * 365 + ${yoe} / 4 - ${yoe} / 100 + ${doy}")
  math(EXPR days "${era} * 146097 + ${doe} - 719468")
  math(EXPR weekday "(${days} + 4) % 7")
  set(weekdays "Sun;Mon;Tue;Wed;Thu;Fri;Sat")
  list(GET weekdays ${weekday} weekday_name)
  set(months "Jan;Feb;Mar;Apr;May;Jun;Jul;Aug;Sep;Oct;Nov;Dec")
  math(EXPR month_index "${m} - 1")
  list(GET months ${month_index} month_name)
  if(d LESS 10)
    string(PREPEND d 0)  # CMake's math drops leading zeros
  endif()
  set(${out} "${weekday_name}, ${d} ${month_name} ${y} 00:00:00 +0000" PARENT_SCOPE)
endfunction()

function(dlock_debian_changelog out maintainer)
  file(STRINGS ${PROJECT_SOURCE_DIR}/CHANGELOG.md headings
    REGEX "^## \\[[0-9]+\\.[0-9]+\\.[0-9]+\\] - [0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]$")
  if(NOT headings)
    message(FATAL_ERROR "dlock: no release heading (## [X.Y.Z] - YYYY-MM-DD) in CHANGELOG.md")
  endif()
  set(text "")
  set(released FALSE)
  foreach(heading IN LISTS headings)
    string(REGEX MATCH "\\[([0-9.]+)\\] - 0*([0-9]+)-0*([0-9]+)-0*([0-9]+)" _ "${heading}")
    set(version ${CMAKE_MATCH_1})
    _dlock_rfc2822_date(date ${CMAKE_MATCH_2} ${CMAKE_MATCH_3} ${CMAKE_MATCH_4})
    if(version VERSION_EQUAL PROJECT_VERSION)
      set(released TRUE)
    endif()
    string(APPEND text "dlock (${version}) unstable; urgency=medium\n\n"
      "  * Release ${version}; its changes are listed in CHANGELOG.md in the source tree.\n\n"
      " -- ${maintainer}  ${date}\n\n")
  endforeach()
  if(NOT released)
    string(TIMESTAMP now "%Y;%m;%d" UTC)
    list(TRANSFORM now REPLACE "^0" "")
    _dlock_rfc2822_date(date ${now})
    string(PREPEND text "dlock (${PROJECT_VERSION}) UNRELEASED; urgency=medium\n\n"
      "  * Not released yet: CHANGELOG.md lists the changes under [Unreleased].\n\n"
      " -- ${maintainer}  ${date}\n\n")
  endif()
  string(REGEX REPLACE "\n\n$" "\n" text "${text}")
  file(WRITE ${out}.tmp "${text}")
  configure_file(${out}.tmp ${out} COPYONLY)  # rewritten only when it changed
  file(REMOVE ${out}.tmp)
endfunction()
