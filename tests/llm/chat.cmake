# Chat templates (src/llm/chat*.c): unit tests of every construct, bound
# and bad input (test-chat), and the comparison with the jinja2 oracle
# over llama.cpp's template collection and SmolLM2's own template
# (chat-render + chat_check.py, which renders with transformers' own
# chat-template environment).
add_executable(test-chat ${CMAKE_CURRENT_LIST_DIR}/test-chat.c)
target_link_libraries(test-chat PRIVATE er_test_support)
add_test(NAME llm-chat COMMAND test-chat)

add_executable(chat-render ${CMAKE_CURRENT_LIST_DIR}/chat-render.c)
target_link_libraries(chat-render PRIVATE er_test_support)
add_test(NAME llm-chat-oracle
         COMMAND ${ER_PY} ${PROJECT_SOURCE_DIR}/tests/llm/chat_check.py
                 --render $<TARGET_FILE:chat-render>
                 --templates ${ER_LLM_CACHE}/llama.cpp/models/templates
                 --gguf ${ER_SMOLLM2}
                 --conversations ${CMAKE_CURRENT_LIST_DIR}/data/chat-conversations.json)
