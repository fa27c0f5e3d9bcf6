# The engine end to end: generated test models (gen_llm_models.py, seeded),
# the public API's own tests, the comparison with
# llama.cpp's committed references, and the CLI. The generated models are
# the same bytes in every build, so the release and sanitizer builds share
# one folder (gen_llm_models.py keeps what is there and starts over when it
# changes).
set(ER_LLM_MODELS "${PROJECT_SOURCE_DIR}/.cache/llm-models" CACHE PATH "Where the generated LLM test models live")
add_test(NAME llm-gen-models
         COMMAND ${ER_PY} ${CMAKE_CURRENT_LIST_DIR}/gen_llm_models.py --out ${ER_LLM_MODELS}
                 --edgerun $<TARGET_FILE:edgerun>)
set_tests_properties(llm-gen-models PROPERTIES FIXTURES_SETUP llm_models TIMEOUT 900)

add_executable(llm-dump ${CMAKE_CURRENT_LIST_DIR}/llm-dump.c)
target_link_libraries(llm-dump PRIVATE libedgerun)

add_executable(test-llm ${CMAKE_CURRENT_LIST_DIR}/test-llm.c)
target_link_libraries(test-llm PRIVATE er_test_support)
target_compile_definitions(test-llm PRIVATE ER_LLM_MODELS="${ER_LLM_MODELS}")
add_test(NAME llm-api COMMAND test-llm)
set_tests_properties(llm-api PROPERTIES FIXTURES_REQUIRED llm_models TIMEOUT 900 ENVIRONMENT "ER_SMOLLM2=${ER_SMOLLM2}")

# The sanitizer build runs the quantizer on two of the ten pairs and skips
# the perplexity run (about 3 of its 5 minutes under ASan); the release
# build runs them all.
if(ER_SANITIZE)
  set(ER_LLM_LIGHT --light)
endif()
# Greedy text, first-step logits and SmolLM2's perplexity against
# llama.cpp's (tests/llm/refs).
add_test(NAME llm-vs-llama-cpp
         COMMAND ${ER_PY} ${CMAKE_CURRENT_LIST_DIR}/check_refs.py --dump $<TARGET_FILE:llm-dump>
                 --models ${ER_LLM_MODELS} --edgerun $<TARGET_FILE:edgerun> ${ER_LLM_LIGHT})
set_tests_properties(llm-vs-llama-cpp PROPERTIES FIXTURES_REQUIRED llm_models TIMEOUT 1200)

add_test(NAME llm-cli
         COMMAND ${ER_PY} ${CMAKE_CURRENT_LIST_DIR}/test_llm_cli.py --edgerun $<TARGET_FILE:edgerun>
                 --models ${ER_LLM_MODELS} --dump $<TARGET_FILE:llm-dump>)
set_tests_properties(llm-cli PROPERTIES FIXTURES_REQUIRED llm_models TIMEOUT 900)

# The LLM quantizer's calibration, report and perplexity budget, and the
# eval gate (the sanitizer build skips the SmolLM2 quality comparison).
add_test(NAME llm-quant
         COMMAND ${ER_PY} ${CMAKE_CURRENT_LIST_DIR}/test_llm_quant.py --edgerun $<TARGET_FILE:edgerun>
                 --models ${ER_LLM_MODELS} ${ER_LLM_LIGHT})
set_tests_properties(llm-quant PROPERTIES FIXTURES_REQUIRED llm_models TIMEOUT 900)

# fp16 for LLMs: analyze's activation ranges against a numpy forward pass,
# eval --fp16, quantize --fp16-safe on a model whose SwiGLU product
# overflows fp16.
add_test(NAME llm-fp16
         COMMAND ${ER_PY} ${CMAKE_CURRENT_LIST_DIR}/test_llm_fp16.py --edgerun $<TARGET_FILE:edgerun>
                 --models ${ER_LLM_MODELS} ${ER_LLM_LIGHT})
set_tests_properties(llm-fp16 PROPERTIES FIXTURES_REQUIRED llm_models TIMEOUT 900)

# ONNX decoders from onnxruntime-genai's model builder (committed test
# models): logits against onnxruntime over 33 KV-cached steps, the NFC
# tokenizer against Hugging Face tokenizers, generate, bad folders.
add_test(NAME llm-onnx
         COMMAND ${ER_PY} ${CMAKE_CURRENT_LIST_DIR}/test_llm_onnx.py --edgerun $<TARGET_FILE:edgerun>
                 --dump $<TARGET_FILE:llm-dump>)
set_tests_properties(llm-onnx PROPERTIES TIMEOUT 600)
