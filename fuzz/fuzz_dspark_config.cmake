# The DSpark drafter's config.json parser and its validation rules against arbitrary bytes.
msa_add_fuzz_target(fuzz_dspark_config
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/fuzz_dspark_config.cpp
  LIBS msa_model)
