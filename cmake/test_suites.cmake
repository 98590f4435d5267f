# recall_add_test_suites(<target> LABEL <layer> SLOW <suite>... SOURCES <file>...)
# Registers one ctest per GoogleTest suite of <target> (--gtest_filter=Suite.*), found in the
# TEST(Suite, ...) lines of its sources. Each test process loads LibTorch (about two seconds here),
# so a process per suite rather than per test keeps the suite's overhead small. Suites named in
# SLOW are labelled `slow` instead of <layer>. Editing a test source re-runs CMake, so new suites
# are registered.
function(recall_add_test_suites target)
  cmake_parse_arguments(ARG "" "LABEL" "SLOW;SOURCES" ${ARGN})
  set(suites "")
  foreach(src ${ARG_SOURCES})
    set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${src})
    file(STRINGS ${src} lines REGEX "^TEST(_F)?\\([A-Za-z0-9_]+,")
    foreach(line ${lines})
      string(REGEX REPLACE "^TEST(_F)?\\(([A-Za-z0-9_]+),.*" "\\2" suite "${line}")
      list(APPEND suites ${suite})
    endforeach()
  endforeach()
  list(REMOVE_DUPLICATES suites)
  foreach(suite ${suites})
    add_test(NAME ${suite} COMMAND ${target} --gtest_filter=${suite}.*)
    set(label ${ARG_LABEL})
    if(suite IN_LIST ARG_SLOW)
      set(label slow)
    endif()
    set_tests_properties(${suite} PROPERTIES LABELS ${label} TIMEOUT 900)
  endforeach()
endfunction()
