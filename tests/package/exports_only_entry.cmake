# A plugin or backend module exports exactly one symbol, the entry point (accgraph_plugin.map):
# `nm -D --defined-only` must list accgraph_plugin_entry and nothing else.
# -DLIBRARY=<file> -DNM=<nm>
execute_process(COMMAND "${NM}" -D --defined-only "${LIBRARY}" RESULT_VARIABLE code
  OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT code EQUAL 0)
  message(FATAL_ERROR "${NM} -D --defined-only ${LIBRARY} failed: ${err}")
endif()
string(REGEX REPLACE "\n$" "" out "${out}")
string(REPLACE "\n" ";" lines "${out}")
set(entry FALSE)
set(others "")
foreach(line IN LISTS lines)
  string(REGEX REPLACE "^.* " "" name "${line}")
  if(name STREQUAL "accgraph_plugin_entry")
    set(entry TRUE)
  elseif(NOT name MATCHES "^ACCGRAPH_PLUGIN_[0-9_]*$" AND NOT name STREQUAL "")
    string(APPEND others " ${name}")
  endif()
endforeach()
message("${out}")
if(NOT entry)
  message(FATAL_ERROR "${LIBRARY} does not export accgraph_plugin_entry")
endif()
if(others)
  message(FATAL_ERROR "${LIBRARY} exports more than its entry point:${others}; link it with "
                      "accgraph_plugin_exports() (the version script accgraph_plugin.map)")
endif()
