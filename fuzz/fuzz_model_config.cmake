# The config.json parser and its validation rules against arbitrary bytes.
msa_add_fuzz_target(fuzz_model_config
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/fuzz_model_config.cpp
  LIBS msa_model)
