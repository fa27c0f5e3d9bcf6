# The block-quantized kernels (src/kernels/qblock*.c).
#  - test-qblock: every optimized product against the reference and against
#    dequantize-then-multiply in double, tile edges, splits, guard bytes;
#    the activation quantizers byte for byte; quantize/dequantize bounds.
#  - qblock_check.py + qblock-dump: our reference dequantize (every type)
#    and quantize (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, BF16) bit for bit against
#    gguf-py's numpy code, on random blocks and on SmolLM2's GGUF tensors.
#  - bench-qblock (bench/kernels/bench-qblock.c): decode-shape GEMV
#    bandwidth against a streaming read; built, not run as a test.
add_executable(test-qblock ${CMAKE_CURRENT_SOURCE_DIR}/test-qblock.c)
target_link_libraries(test-qblock PRIVATE er_test_support)
add_test(NAME llm-qblock COMMAND test-qblock)

add_executable(qblock-dump ${CMAKE_CURRENT_SOURCE_DIR}/qblock-dump.c)
target_link_libraries(qblock-dump PRIVATE er_test_support)
add_test(NAME llm-qblock-gguf-py
         COMMAND ${ER_PY} ${CMAKE_CURRENT_SOURCE_DIR}/qblock_check.py --dump $<TARGET_FILE:qblock-dump>)

add_executable(bench-qblock ${PROJECT_SOURCE_DIR}/bench/kernels/bench-qblock.c)
target_link_libraries(bench-qblock PRIVATE libedgerun)
target_include_directories(bench-qblock PRIVATE ${PROJECT_SOURCE_DIR}/src)
