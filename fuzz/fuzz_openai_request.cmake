msa_add_fuzz_target(fuzz_openai_request SOURCES ${CMAKE_CURRENT_LIST_DIR}/fuzz_openai_request.cpp LIBS msa_server)
