# Tokenizer fuzz target (see fuzz_tokenizer.cpp): encodes arbitrary bytes and decodes arbitrary ids with the committed
# tiny tokenizer, compiles arbitrary regex patterns, and loads arbitrary tokenizer.json documents.
msa_add_fuzz_target(fuzz_tokenizer SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/fuzz_tokenizer.cpp LIBS msa_tokenizer)
target_compile_definitions(fuzz_tokenizer PRIVATE
  MSA_FUZZ_TINY_TOKENIZER="${PROJECT_SOURCE_DIR}/tests/tokenizer/data/tiny_tokenizer.json")
