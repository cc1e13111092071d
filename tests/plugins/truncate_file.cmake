# Writes the first BYTES bytes of INPUT to OUTPUT, binary-safe (file(DOWNLOAD) of a file:// URL
# with a byte range: CMake strings cannot hold NUL bytes, so file(READ)/file(WRITE) cannot).
# cmake -DINPUT=<file> -DOUTPUT=<file> -DBYTES=<n> -P truncate_file.cmake
math(EXPR last "${BYTES} - 1")
file(DOWNLOAD "file://${INPUT}" "${OUTPUT}" RANGE_START 0 RANGE_END ${last} STATUS status)
list(GET status 0 code)
file(SIZE "${OUTPUT}" size)
if(NOT code EQUAL 0 OR NOT size EQUAL BYTES)
  message(FATAL_ERROR "copying the first ${BYTES} bytes of ${INPUT} to ${OUTPUT} failed "
    "(${status}, ${size} bytes written)")
endif()
