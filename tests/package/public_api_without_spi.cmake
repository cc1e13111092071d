# The public API compiles without the SPI (Note [Layer targets]): a translation unit that
# includes only <accgraph/accgraph.hpp>, compiled against the installed include directory alone,
# must open accgraph.hpp and no header under accgraph/spi/. The compiler's -H lists every header
# it opens (GCC and Clang), one per line, on stderr.
# -DCXX=<compiler> -DINCLUDE_DIR=<prefix>/include -DWORK=<scratch dir>
file(MAKE_DIRECTORY "${WORK}")
set(source "${WORK}/only_accgraph_hpp.cpp")
file(WRITE "${source}" "#include <accgraph/accgraph.hpp>\nint main() { return 0; }\n")
execute_process(COMMAND "${CXX}" -std=c++17 -fsyntax-only -H "-I${INCLUDE_DIR}" "${source}"
  RESULT_VARIABLE code OUTPUT_VARIABLE out ERROR_VARIABLE opened)
if(NOT code EQUAL 0)
  message(FATAL_ERROR "<accgraph/accgraph.hpp> alone does not compile against ${INCLUDE_DIR}:\n"
                      "${out}${opened}")
endif()
if(NOT opened MATCHES "accgraph/accgraph\\.hpp")
  message(FATAL_ERROR "${CXX} -H did not list accgraph/accgraph.hpp, so this check cannot see "
                      "which headers were opened:\n${opened}")
endif()
string(REGEX MATCHALL "[^\n]*accgraph/spi/[^\n]*" spi_lines "${opened}")
if(spi_lines)
  string(REPLACE ";" "\n" spi_lines "${spi_lines}")
  message(FATAL_ERROR "<accgraph/accgraph.hpp> opened SPI headers (the public API must compile "
                      "without accgraph/spi/; define public types in the public headers and let "
                      "spi/ include them):\n${spi_lines}")
endif()
message("accgraph.hpp alone: no accgraph/spi/ header opened")
