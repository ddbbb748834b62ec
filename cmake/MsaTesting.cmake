# msa_add_test(<name> SOURCES ... LIBS ... [LABELS ...]): one GoogleTest binary, each TEST registered with ctest.
# Label "unit" marks tests that also run in the ASan+UBSan build; "slow", "parity", "e2e" mark the others.
# With MSA_UNIT_TESTS_ONLY (the `make asan` build, which runs only `ctest -L unit`) a test binary without the label
# "unit" is left out of the default build and not registered; it can still be built by name.
option(MSA_UNIT_TESTS_ONLY "Build and register only the GoogleTest binaries labelled unit" OFF)
include(GoogleTest)

# ---- Compile time of the test code (docs/contributing.md, "CI time budget") -------------------------------------
# Most of the CI time goes into compiling test files: GoogleTest bodies, JSON literals, RapidCheck generators. Two
# things cut it without changing what is tested:
# - The test executables' own code is optimised less than the libraries under test (-O1 in Release, -O0 in the
#   sanitizer build, where the instrumentation makes optimisation most expensive). The libraries keep the build
#   type's flags, so every test still runs the code that users get; only the test bodies themselves run slower.
# - The third-party headers that every test file parses (GoogleTest, gmock, RapidCheck, nlohmann/json, fmt, the
#   STL) are precompiled once and reused by every test executable (msa_test_pch), when MSA_PCH is on.
if(MSA_SANITIZE)
  set(_msa_test_opt_default "-O0")
elseif(CMAKE_BUILD_TYPE STREQUAL "Release")
  set(_msa_test_opt_default "-O1")
else()
  set(_msa_test_opt_default "")
endif()
set(MSA_TEST_OPT_FLAGS "${_msa_test_opt_default}" CACHE STRING
    "Optimisation flags of the test executables' own sources (the libraries they test keep the build type's)")
# msa_test_code(<target>): the flags above for a test executable (msa_add_test does it; custom test targets call it).
function(msa_test_code target)
  separate_arguments(opt UNIX_COMMAND "${MSA_TEST_OPT_FLAGS}")
  if(opt)
    target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:${opt}>)  # after the build type's: it wins
  endif()
  if(MSA_PCH)
    if(NOT TARGET msa_test_pch)
      # The header set is compiled in a target of its own with the same flags as the tests (an executable, so that
      # it gets their -fPIE; GCC rejects a precompiled header built with other flags, and -Werror makes that an
      # error rather than a silent slow build).
      set(anchor ${PROJECT_BINARY_DIR}/msa_test_pch.cpp)
      file(CONFIGURE OUTPUT ${anchor} CONTENT "// The anchor of the test executables' precompiled header.\n")
      add_executable(msa_test_pch EXCLUDE_FROM_ALL ${anchor})
      target_link_libraries(msa_test_pch PRIVATE msa_core nlohmann_json::nlohmann_json fmt::fmt GTest::gtest
                                                 GTest::gtest_main GTest::gmock rapidcheck rapidcheck_gtest)
      target_compile_definitions(msa_test_pch PRIVATE MSA_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
      msa_target_defaults(msa_test_pch)
      if(opt)
        target_compile_options(msa_test_pch PRIVATE $<$<COMPILE_LANGUAGE:CXX>:${opt}>)
      endif()
      target_precompile_headers(msa_test_pch PRIVATE ${MSA_PCH_HEADERS}
        <gtest/gtest.h> <gmock/gmock.h> <rapidcheck.h> <rapidcheck/gtest.h>)
    endif()
    target_precompile_headers(${target} REUSE_FROM msa_test_pch)
  endif()
endfunction()
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
  msa_test_code(${name})
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
