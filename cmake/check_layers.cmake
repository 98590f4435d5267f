# Fails when a file of a layer includes a layer it does not reach through its links
# (cmake/layers.cmake): a file in src/<layer>/ or include/recall/<layer>/ may include recall/<l>/
# only for l in the closure of <layer>.
#   cmake -DROOT=<source dir> -P cmake/check_layers.cmake
cmake_policy(VERSION 3.18)
include(${CMAKE_CURRENT_LIST_DIR}/layers.cmake)
set(bad "")
foreach(layer ${RECALL_LAYERS} cli)
  recall_layer_closure(${layer} allowed)
  file(GLOB files ${ROOT}/src/${layer}/*.cpp ${ROOT}/src/${layer}/*.h
       ${ROOT}/include/recall/${layer}/*.h)
  foreach(f ${files})
    file(STRINGS ${f} includes REGEX "^#include \"recall/[a-z_]+/")
    foreach(line ${includes})
      string(REGEX REPLACE "^#include \"recall/([a-z_]+)/.*" "\\1" target "${line}")
      if(NOT target IN_LIST allowed)
        file(RELATIVE_PATH rel ${ROOT} ${f})
        string(APPEND bad "  ${rel} (${layer}) includes recall/${target}/\n")
      endif()
    endforeach()
  endforeach()
endforeach()
# Every folder of src/ is a layer: a new one must be placed in cmake/layers.cmake.
file(GLOB folders LIST_DIRECTORIES true ${ROOT}/src/*)
foreach(folder ${folders})
  get_filename_component(name ${folder} NAME)
  if(IS_DIRECTORY ${folder} AND NOT name IN_LIST RECALL_LAYERS AND NOT name STREQUAL "cli")
    string(APPEND bad "  src/${name} is no layer of cmake/layers.cmake\n")
  endif()
endforeach()
if(bad)
  message(FATAL_ERROR "the layers of cmake/layers.cmake are broken:\n${bad}")
endif()
