# afs_hh_core: the engine-free heavy-hitter classes (Count-Min, Space-Saving, seekable Zipf generator, evaluation).
# Included by algorithms/heavy_hitters/CMakeLists.txt; paths are relative to this file.
afs_library(afs_hh_core
  SOURCES
    ${CMAKE_CURRENT_LIST_DIR}/count_min.cc
    ${CMAKE_CURRENT_LIST_DIR}/space_saving.cc
    ${CMAKE_CURRENT_LIST_DIR}/zipf.cc
    ${CMAKE_CURRENT_LIST_DIR}/evaluation.cc
  DEPS afs_core PkgConfig::XXHASH)
