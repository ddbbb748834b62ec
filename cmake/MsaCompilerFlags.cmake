# Warning and sanitizer flags for our own targets (never applied to third-party headers, which come in as SYSTEM).

set(MSA_WARNING_FLAGS -Wall -Wextra -Wshadow=local -Wnon-virtual-dtor -Wcast-align -Wunused -Wpedantic
                      -Wno-missing-field-initializers)
if(MSA_WERROR)
  list(APPEND MSA_WARNING_FLAGS -Werror)
endif()

if(MSA_SANITIZE)
  set(MSA_SANITIZER_FLAGS -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer)
  add_compile_options(${MSA_SANITIZER_FLAGS})
  add_link_options(${MSA_SANITIZER_FLAGS})
  # The sanitizer build is the RelWithDebInfo one with -O1 -g1 instead of -O2 -g: it compiles in about half the CPU
  # time (most of it goes to optimising the big JSON/gtest functions and tracking their locals for the debugger),
  # -O1 is what ASan's docs suggest, and -g1 (line tables) still gives every frame of a report its file:line.
  # NDEBUG stays, as in the release build, so both builds test the same code.
  set(MSA_SANITIZE_OPT_FLAGS "-O1 -g1" CACHE STRING "Optimisation and debug flags of the MSA_SANITIZE RelWithDebInfo build")
  set(CMAKE_C_FLAGS_RELWITHDEBINFO "${MSA_SANITIZE_OPT_FLAGS} -DNDEBUG")
  set(CMAKE_CXX_FLAGS_RELWITHDEBINFO "${MSA_SANITIZE_OPT_FLAGS} -DNDEBUG")
  # The numeric libraries stay at -O2: they are cheap to compile, and the model tests spend their run time in them
  # (at -O1 the dense/sparse property test ran over twice as long under ASan).
  set(MSA_SANITIZE_O2_LIBRARIES msa_core msa_formats msa_kernels msa_kv msa_model)
endif()

# The baseline build targets generic x86-64 so that the binary runs on any machine; AVX2/FMA/F16C code lives in
# files named *_avx2.cpp that get the extra flags and are only called after a run-time CPU check (core/cpu_features).
set(MSA_AVX2_FLAGS -mavx2 -mfma -mf16c -mbmi2)
# AVX-512 kernels (files named *_avx512.cpp) also use AVX2 helpers, hence both sets.
set(MSA_AVX512_FLAGS ${MSA_AVX2_FLAGS} -mavx512f -mavx512bw -mavx512dq -mavx512vl -mavx512vnni)

# Precompiled third-party headers: nlohmann/json, fmt and the STL parts most files use are parsed once per target
# instead of once per file (the test executables share one set with GoogleTest and RapidCheck added, see
# MsaTesting.cmake). It saves 1-4 CPU-s on each file that includes them. Off by default when compiling through a
# launcher such as ccache, which does not cache compiles that use a precompiled header; CI compiles without one.
# A precompiled header built with other flags than a file's is rejected by GCC (-Winvalid-pch, an error under
# -Werror), so the files with extra per-file flags (the *_avx2.cpp files) skip it.
if(CMAKE_CXX_COMPILER_LAUNCHER)
  set(_msa_pch_default OFF)
else()
  set(_msa_pch_default ON)
endif()
option(MSA_PCH "Precompile the third-party headers of the heavier targets (tests, server, CLI)"
       ${_msa_pch_default})
set(MSA_PCH_HEADERS
    <algorithm> <array> <atomic> <chrono> <cmath> <condition_variable> <cstdint> <cstdlib> <cstring>
    <filesystem> <fstream> <functional> <limits> <map> <memory> <mutex> <numeric> <optional> <random> <set>
    <sstream> <string> <string_view> <thread> <unordered_map> <utility> <vector>
    <fmt/format.h> <nlohmann/json.hpp>)

# msa_precompile_headers(<target> [<extra header>...]): MSA_PCH_HEADERS (and the extra ones) precompiled for target.
function(msa_precompile_headers target)
  if(MSA_PCH)
    target_precompile_headers(${target} PRIVATE ${MSA_PCH_HEADERS} ${ARGN})
  endif()
endfunction()

# msa_target_defaults(<target>): warnings, include root, for every target of ours.
function(msa_target_defaults target)
  get_target_property(kind ${target} TYPE)
  if(kind STREQUAL "INTERFACE_LIBRARY")
    return()
  endif()
  target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:${MSA_WARNING_FLAGS}>)
  if(MSA_SANITIZE AND target IN_LIST MSA_SANITIZE_O2_LIBRARIES AND CMAKE_BUILD_TYPE STREQUAL "RelWithDebInfo")
    target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:-O2>)  # comes after, so it wins over -O1
  endif()
endfunction()

# msa_avx2_sources(<file>...): compile the given sources with AVX2/FMA/F16C enabled.
function(msa_avx2_sources)
  set_source_files_properties(${ARGN} PROPERTIES COMPILE_OPTIONS "${MSA_AVX2_FLAGS}" SKIP_PRECOMPILE_HEADERS ON)
endfunction()

# msa_avx512_sources(<file>...): compile the given sources with AVX-512 (F/BW/DQ/VL/VNNI) and AVX2 enabled.
function(msa_avx512_sources)
  set_source_files_properties(${ARGN} PROPERTIES COMPILE_OPTIONS "${MSA_AVX512_FLAGS}" SKIP_PRECOMPILE_HEADERS ON)
endfunction()

# msa_add_library(<name> SOURCES ... DEPS ... [PUBLIC_DEPS ...]): a static library of one module.
function(msa_add_library name)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS;PUBLIC_DEPS;AVX2_SOURCES;AVX512_SOURCES" ${ARGN})
  if(NOT ARG_SOURCES AND NOT ARG_AVX2_SOURCES AND NOT ARG_AVX512_SOURCES)
    # A module whose sources have not landed yet: headers only.
    add_library(${name} INTERFACE)
    target_include_directories(${name} INTERFACE ${PROJECT_SOURCE_DIR}/src)
    target_link_libraries(${name} INTERFACE ${ARG_PUBLIC_DEPS})
    return()
  endif()
  add_library(${name} STATIC ${ARG_SOURCES} ${ARG_AVX2_SOURCES} ${ARG_AVX512_SOURCES})
  target_include_directories(${name} PUBLIC ${PROJECT_SOURCE_DIR}/src)
  target_link_libraries(${name} PUBLIC ${ARG_PUBLIC_DEPS} PRIVATE ${ARG_DEPS})
  if(ARG_AVX2_SOURCES)
    msa_avx2_sources(${ARG_AVX2_SOURCES})
  endif()
  if(ARG_AVX512_SOURCES)
    msa_avx512_sources(${ARG_AVX512_SOURCES})
  endif()
  msa_target_defaults(${name})
endfunction()
