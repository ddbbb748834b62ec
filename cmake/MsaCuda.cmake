# CUDA is built when nvcc is found (MSA_CUDA=AUTO) or demanded (ON); OFF switches it off.
# Kernels are compiled for Hopper only: -gencode=arch=compute_90a,code=sm_90a.
set(MSA_CUDA_ENABLED OFF)
if(NOT MSA_CUDA STREQUAL "OFF")
  if(NOT CMAKE_CUDA_COMPILER AND EXISTS /usr/local/cuda/bin/nvcc)
    set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
  endif()
  include(CheckLanguage)
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    set(CMAKE_CUDA_ARCHITECTURES OFF)  # we pass -gencode ourselves
    enable_language(CUDA)
    find_package(CUDAToolkit REQUIRED)
    # CMake 3.25 does not know nvcc 13's C++20 flag ("CUDA20"); teach it, then ask for C++20 like the C++ code.
    set(CMAKE_CUDA20_STANDARD_COMPILE_OPTION "-std=c++20")
    set(CMAKE_CUDA20_EXTENSION_COMPILE_OPTION "-std=c++20")
    set(CMAKE_CUDA_STANDARD 20)
    set(CMAKE_CUDA_STANDARD_REQUIRED ON)
    set(MSA_CUDA_ENABLED ON)
    set(MSA_CUDA_FLAGS -gencode=arch=compute_90a,code=sm_90a --expt-relaxed-constexpr -lineinfo
                       -Xcompiler=-Wall,-Wextra)
    if(MSA_WERROR)
      list(APPEND MSA_CUDA_FLAGS -Werror=all-warnings -Xcompiler=-Werror)
    endif()
  elseif(MSA_CUDA STREQUAL "ON")
    message(FATAL_ERROR "MSA_CUDA=ON but no CUDA compiler (nvcc) was found")
  endif()
endif()

# msa_cuda_target(<target>): apply our CUDA flags to the .cu sources of a target.
function(msa_cuda_target target)
  target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CUDA>:${MSA_CUDA_FLAGS}>)
  set_target_properties(${target} PROPERTIES CUDA_SEPARABLE_COMPILATION OFF)
endfunction()
