# The GGUF reader: a valid file read back, TESTING.md 16a, every truncation.
add_executable(test-gguf ${CMAKE_CURRENT_LIST_DIR}/test-gguf.c)
target_link_libraries(test-gguf PRIVATE er_test_support)
add_test(NAME llm-gguf COMMAND test-gguf)
