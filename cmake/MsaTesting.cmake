# msa_add_test(<name> SOURCES ... LIBS ... [LABELS ...]): one GoogleTest binary, each TEST registered with ctest.
# Label "unit" marks tests that also run in the ASan+UBSan build; "slow", "parity", "e2e" mark the others.
# With MSA_UNIT_TESTS_ONLY (the `make asan` build, which runs only `ctest -L unit`) a test binary without the label
# "unit" is left out of the default build and not registered; it can still be built by name.
option(MSA_UNIT_TESTS_ONLY "Build and register only the GoogleTest binaries labelled unit" OFF)
include(GoogleTest)
function(msa_add_test name)
  cmake_parse_arguments(ARG "" "TIMEOUT" "SOURCES;LIBS;LABELS" ${ARGN})
  if(NOT ARG_LABELS)
    set(ARG_LABELS unit)
  endif()
  add_executable(${name} ${ARG_SOURCES})
  target_link_libraries(${name} PRIVATE ${ARG_LIBS} GTest::gtest GTest::gtest_main GTest::gmock rapidcheck
                                        rapidcheck_gtest)
  target_include_directories(${name} PRIVATE ${PROJECT_SOURCE_DIR}/src ${PROJECT_SOURCE_DIR}/tests)
  target_compile_definitions(${name} PRIVATE MSA_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
  msa_target_defaults(${name})
  if(MSA_UNIT_TESTS_ONLY AND NOT "unit" IN_LIST ARG_LABELS)
    set_target_properties(${name} PROPERTIES EXCLUDE_FROM_ALL ON)
    return()
  endif()
  if(NOT ARG_TIMEOUT)
    set(ARG_TIMEOUT 600)
  endif()
  gtest_discover_tests(${name} DISCOVERY_MODE PRE_TEST PROPERTIES LABELS "${ARG_LABELS}" TIMEOUT ${ARG_TIMEOUT})
endfunction()

# Registers every tools/<tool>/tests/test_*.py as one ctest entry `<tool>_<file>`, run with Debian's python3 (numpy,
# torch, pytest from apt). Label "parity": release build only (Python, nothing the sanitizers would see).
function(msa_add_python_tests tool)
  find_program(MSA_DEBIAN_PYTHON3 python3 PATHS /usr/bin NO_DEFAULT_PATH)
  if(NOT MSA_DEBIAN_PYTHON3)
    message(STATUS "${tool}: /usr/bin/python3 not found, its Python tests are not registered")
    return()
  endif()
  set(_dir ${PROJECT_SOURCE_DIR}/tools/${tool})
  file(GLOB _tests CONFIGURE_DEPENDS ${_dir}/tests/test_*.py)
  foreach(_t ${_tests})
    get_filename_component(_name ${_t} NAME_WE)
    add_test(NAME ${tool}_${_name}
             COMMAND ${MSA_DEBIAN_PYTHON3} -m pytest -q -p no:cacheprovider ${_t}
             WORKING_DIRECTORY ${_dir})
    set_tests_properties(${tool}_${_name} PROPERTIES LABELS parity TIMEOUT 1800
                         ENVIRONMENT "PYTHONDONTWRITEBYTECODE=1;OMP_NUM_THREADS=1")
  endforeach()
endfunction()
