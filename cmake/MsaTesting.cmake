# msa_add_test(<name> SOURCES ... LIBS ... [LABELS ...]): one GoogleTest binary, each TEST registered with ctest.
# Label "unit" marks tests that also run in the ASan+UBSan build; "slow", "parity", "e2e" mark the others.
include(GoogleTest)
function(msa_add_test name)
  cmake_parse_arguments(ARG "" "TIMEOUT" "SOURCES;LIBS;LABELS" ${ARGN})
  add_executable(${name} ${ARG_SOURCES})
  target_link_libraries(${name} PRIVATE ${ARG_LIBS} GTest::gtest GTest::gtest_main GTest::gmock rapidcheck
                                        rapidcheck_gtest)
  target_include_directories(${name} PRIVATE ${PROJECT_SOURCE_DIR}/src ${PROJECT_SOURCE_DIR}/tests)
  target_compile_definitions(${name} PRIVATE MSA_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
  msa_target_defaults(${name})
  if(NOT ARG_LABELS)
    set(ARG_LABELS unit)
  endif()
  if(NOT ARG_TIMEOUT)
    set(ARG_TIMEOUT 600)
  endif()
  gtest_discover_tests(${name} DISCOVERY_MODE PRE_TEST PROPERTIES LABELS "${ARG_LABELS}" TIMEOUT ${ARG_TIMEOUT})
endfunction()
