# The safetensors header parser (length prefix, JSON header, offsets) against arbitrary bytes.
msa_add_fuzz_target(fuzz_safetensors_header
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/fuzz_safetensors_header.cpp
  LIBS msa_formats)
