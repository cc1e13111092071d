# Warnings. accgraph_warnings(<target>) gives a target of this project the warning flags it is
# kept clean of; ACCGRAPH_WERROR=ON (the `ci` preset) makes every warning of every C++ compile
# in the tree an error, tests, tools and benchmarks included.
option(ACCGRAPH_WERROR "Treat compiler warnings as errors (CI)" OFF)
if(ACCGRAPH_WERROR AND CMAKE_CXX_COMPILER_ID MATCHES "GNU|Clang")
  add_compile_options($<$<COMPILE_LANGUAGE:CXX>:-Werror>)
endif()

function(accgraph_warnings target)
  if(CMAKE_CXX_COMPILER_ID MATCHES "GNU|Clang")
    target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wpedantic>)
  endif()
endfunction()
