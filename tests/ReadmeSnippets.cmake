# SPDX-License-Identifier: Apache-2.0
# dlock_readme_snippets(<sources-var> <include-var> <dir> <doc>...): each ```cpp block of the
# given Markdown files, written at configure time to a file of its own in <dir>
# (README_01.cpp, reference_01.cpp, ...), as a reader pastes it: the block alone, after a #line
# that points compiler messages at the block's line in the document. <sources-var> gets those
# files, to be compiled one by one, each with nothing before it; <include-var> gets <dir>/all.inc,
# which includes them all in order, for the tests that call the snippets' functions. Editing a
# document re-runs the configure step. A document without a ```cpp block is an error: the
# check must not pass by finding nothing.
function(dlock_readme_snippets sources_var include_var dir)
  file(MAKE_DIRECTORY ${dir})
  set(sources "")
  set(all "// Generated from the documents' ```cpp blocks (tests/ReadmeSnippets.cmake).\n")
  foreach(doc IN LISTS ARGN)
    set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${doc})
    get_filename_component(stem ${doc} NAME_WE)
    file(READ ${doc} text)
    set(count 0)
    set(line 1)  # the document line the rest of `text` starts on
    while(TRUE)
      string(FIND "${text}" "```cpp\n" start)
      if(start EQUAL -1)
        break()
      endif()
      string(SUBSTRING "${text}" 0 ${start} before)
      string(REGEX MATCHALL "\n" newlines "${before}")
      list(LENGTH newlines skipped)
      math(EXPR line "${line} + ${skipped} + 1")  # the block's first line, after the fence
      math(EXPR start "${start} + 7")
      string(SUBSTRING "${text}" ${start} -1 text)
      string(FIND "${text}" "```" end)
      if(end EQUAL -1)
        message(FATAL_ERROR "${doc}: a ```cpp block near line ${line} is not closed")
      endif()
      string(SUBSTRING "${text}" 0 ${end} block)
      string(SUBSTRING "${text}" ${end} -1 text)
      string(REGEX MATCHALL "\n" newlines "${block}")
      list(LENGTH newlines block_lines)

      math(EXPR count "${count} + 1")
      if(count LESS 10)
        set(number 0${count})
      else()
        set(number ${count})
      endif()
      set(source ${dir}/${stem}_${number}.cpp)
      file(WRITE ${source}.tmp "#line ${line} \"${doc}\"\n${block}")
      configure_file(${source}.tmp ${source} COPYONLY)  # rewritten only when the block changed
      file(REMOVE ${source}.tmp)
      list(APPEND sources ${source})
      string(APPEND all "#include \"${source}\"\n")
      math(EXPR line "${line} + ${block_lines}")
    endwhile()
    if(count EQUAL 0)
      message(FATAL_ERROR "${doc}: no ```cpp block found")
    endif()
  endforeach()
  file(GLOB stale ${dir}/*.cpp)  # blocks a shorter document no longer has
  list(REMOVE_ITEM stale ${sources})
  if(stale)
    file(REMOVE ${stale})
  endif()
  file(WRITE ${dir}/all.inc.tmp "${all}")
  configure_file(${dir}/all.inc.tmp ${dir}/all.inc COPYONLY)
  file(REMOVE ${dir}/all.inc.tmp)
  set(${sources_var} ${sources} PARENT_SCOPE)
  set(${include_var} ${dir}/all.inc PARENT_SCOPE)
endfunction()
