# Turns a file into a C array (run by the build; the output is generated and
# never committed): cmake -DIN=status.html -DOUT=status-page.c -P embed.cmake
file(READ "${IN}" hex HEX)
string(LENGTH "${hex}" n)
math(EXPR bytes "${n} / 2")
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," body "${hex}")
string(REGEX REPLACE "(0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,)" "\\1\n" body "${body}")
file(WRITE "${OUT}" "/* Generated from src/serve/status.html by src/serve/embed.cmake; do not edit. */\n#include <stddef.h>\nconst unsigned char er__status_html[] = {\n${body}0};\nconst size_t er__status_html_len = ${bytes};\n")
