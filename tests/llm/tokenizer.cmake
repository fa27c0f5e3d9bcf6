# Tokenizers (src/llm/tokenizer.c, tok-*.c, unicode-data.c): unit tests of
# bad input, special tokens, round trips and the decode rules
# (test-tokenizer), and the comparison of every vocabulary edgerun claims
# with llama.cpp's test vectors and with Hugging Face `tokenizers`, from the
# GGUF and from the tokenizer.json Hugging Face writes for it (tok-dump +
# tokenizer_check.py). The default run compares every vocabulary with
# llama.cpp's vectors and four of them (SmolLM2, GPT-2 and the two
# SentencePiece vocabularies, llama-spm and phi-3) with Hugging Face too; `make llm-oracles` compares all of them with
# Hugging Face (about 3 minutes more: the converter is slow on 150k vocabs).
add_executable(test-tokenizer ${CMAKE_CURRENT_LIST_DIR}/test-tokenizer.c)
target_link_libraries(test-tokenizer PRIVATE er_test_support)
target_compile_definitions(test-tokenizer PRIVATE
  ER_SMOLLM2_GGUF="${ER_SMOLLM2}"
  ER_VOCAB_DIR="${ER_LLM_CACHE}/llama.cpp/models")
add_test(NAME llm-tokenizer COMMAND test-tokenizer)

add_executable(tok-dump ${CMAKE_CURRENT_LIST_DIR}/tok-dump.c)
target_link_libraries(tok-dump PRIVATE er_test_support)
add_test(NAME llm-tokenizer-oracle
         COMMAND ${ER_PY} ${PROJECT_SOURCE_DIR}/tests/llm/tokenizer_check.py
                 --dump $<TARGET_FILE:tok-dump>
                 --vocabs ${ER_LLM_CACHE}/llama.cpp/models
                 --smollm2 ${ER_SMOLLM2}
                 --texts ${CMAKE_CURRENT_LIST_DIR}/data/tokenizer-texts.txt
                 --hf-only smollm2,gpt-2,llama-spm,phi-3)
set_tests_properties(llm-tokenizer-oracle PROPERTIES TIMEOUT 1800)

# The generated Unicode table against the regex engine of Hugging Face
# `tokenizers` (Oniguruma), every code point, every class the patterns use.
# Python against a C source file: the sanitizer build has nothing to add.
if(NOT ER_SANITIZE)
  add_test(NAME llm-tokenizer-unicode
           COMMAND ${ER_PY} ${PROJECT_SOURCE_DIR}/tools/gen_unicode_tables.py
                   --check-table ${PROJECT_SOURCE_DIR}/src/llm/unicode-data.c)
  set_tests_properties(llm-tokenizer-unicode PROPERTIES TIMEOUT 900)
endif()
