# Generates a C file holding a text file as a NUL-terminated char array.
# cmake -DIN=file -DOUT=file.c -DNAME=symbol -P embed.cmake
# The output's first line says it is generated and by what.
file(READ "${IN}" hex HEX)
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
string(REGEX REPLACE "(0x[0-9a-f][0-9a-f],){16}" "\\0\n  " bytes "${bytes}")
file(WRITE "${OUT}" "/* Generated from ${IN} by cmake/embed.cmake; do not edit. */\n"
     "const char ${NAME}[] = {\n  ${bytes}0x00};\n")
