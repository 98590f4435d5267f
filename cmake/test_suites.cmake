# recall_add_test_suites(<target> LABEL <layer> SLOW <suite>... SOURCES <file>...)
# Registers one ctest per GoogleTest suite of <target> (--gtest_filter=Suite.*), found in the
# TEST(Suite, ...) lines of its sources. Each test process loads LibTorch (about two seconds here),
# so a process per suite rather than per test keeps the suite's overhead small. Suites named in
# SLOW are labelled `slow` instead of <layer>. Editing a test source re-runs CMake, so new suites
# are registered.
#
# A test that may skip (its body calls GTEST_SKIP or a RECALL_..._OR_SKIP macro) gets a ctest of
# its own (Suite.Name), and its suite's ctest leaves it out: a program exits with
# RECALL_SKIPPED_EXIT_CODE when all its tests skipped (tests/main.cpp), which ctest shows as
# Skipped, so neither a skip nor the tests that passed beside it are hidden.
#
# A test whose body asks for a Python with torch alone (python_with_torch, tests/python_test_util.h)
# is also labelled `python`, so that `ctest -L python` reruns those tests under another Python
# (RECALL_PYTHON); one that asks for transformers is labelled `transformers`: it runs under the one
# Python that has it, so a rerun would repeat the same run.
set(RECALL_SKIPPED_EXIT_CODE 77)  # tests/main.cpp's kSkippedExitCode

function(recall_add_test_suites target)
  cmake_parse_arguments(ARG "" "LABEL" "SLOW;SOURCES" ${ARGN})
  set(suites "")
  set(skippable "")  # Suite.Name of the tests that may skip
  set(python "")  # Suite.Name of the tests that run a Python with torch alone
  set(transformers "")  # Suite.Name of the tests that run a Python with transformers
  foreach(src ${ARG_SOURCES})
    set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${src})
    file(STRINGS ${src} lines REGEX "^TEST(_F)?\\([A-Za-z0-9_]+,|GTEST_SKIP|_OR_SKIP\\(|python_with")
    set(current "")
    foreach(line ${lines})
      if(line MATCHES "^TEST(_F)?\\(([A-Za-z0-9_]+), *([A-Za-z0-9_]*)")
        set(suite ${CMAKE_MATCH_2})
        list(APPEND suites ${suite})
        set(current ${suite}.${CMAKE_MATCH_3})
        list(APPEND tests_of_${suite} ${current})
      elseif(NOT current STREQUAL "")  # in a test's body (not in a #define or helper above them)
        if(line MATCHES "python_with\\(\"[^\"]*transformers")
          list(APPEND transformers ${current})
        elseif(line MATCHES "python_with")
          list(APPEND python ${current})
        endif()
        if(line MATCHES "GTEST_SKIP|_OR_SKIP\\(")
          list(APPEND skippable ${current})
        endif()
      endif()
    endforeach()
  endforeach()
  list(REMOVE_DUPLICATES suites)
  list(REMOVE_DUPLICATES skippable)
  foreach(suite ${suites})
    set(label ${ARG_LABEL})
    if(suite IN_LIST ARG_SLOW)
      set(label slow)
    endif()
    set(rest "")
    set(alone "")
    foreach(test ${tests_of_${suite}})
      if(test IN_LIST skippable)
        list(APPEND alone ${test})
      else()
        list(APPEND rest ${test})
      endif()
    endforeach()
    set(names "")
    foreach(test ${alone})
      add_test(NAME ${test} COMMAND ${target} --gtest_filter=${test})
      list(APPEND names ${test})
    endforeach()
    if(rest)
      if(alone)
        string(REPLACE ";" ":" excluded "${alone}")
        add_test(NAME ${suite} COMMAND ${target} --gtest_filter=${suite}.*-${excluded})
      else()
        add_test(NAME ${suite} COMMAND ${target} --gtest_filter=${suite}.*)
      endif()
      list(APPEND names ${suite})
    endif()
    set_tests_properties(${names} PROPERTIES LABELS ${label} TIMEOUT 900
      SKIP_RETURN_CODE ${RECALL_SKIPPED_EXIT_CODE})
    foreach(test ${alone})
      if(test IN_LIST python)
        set_property(TEST ${test} APPEND PROPERTY LABELS python)
      elseif(test IN_LIST transformers)
        set_property(TEST ${test} APPEND PROPERTY LABELS transformers)
      endif()
    endforeach()
    if(RECALL_REQUIRE_FAST_GEMM)
      set_property(TEST ${names} APPEND PROPERTY ENVIRONMENT RECALL_REQUIRE_FAST_GEMM=1)
    endif()
  endforeach()
endfunction()
