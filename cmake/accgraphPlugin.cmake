# accgraph_add_plugin(<target> SOURCES ...): builds an out-of-tree backend plugin as a MODULE
# library that links accgraph::accgraph and exports only its entry point, so that
# `ACCGRAPH_PLUGIN_PATH=<dir>` or accgraph::load_plugin(<file>) can load it.
# accgraph_plugin_exports(<target>): the "only the entry point" part alone, for a MODULE library
# made another way: hidden visibility, and on ELF platforms a linker version script
# (accgraph_plugin.map) that makes it a guarantee (`nm -D --defined-only` lists
# accgraph_plugin_entry and nothing else).
set_property(GLOBAL PROPERTY ACCGRAPH_PLUGIN_MAP "${CMAKE_CURRENT_LIST_DIR}/accgraph_plugin.map")

function(accgraph_plugin_exports target)
  set_target_properties(${target} PROPERTIES
    CXX_VISIBILITY_PRESET hidden
    VISIBILITY_INLINES_HIDDEN ON)
  if(CMAKE_CXX_COMPILER_ID MATCHES "GNU|Clang" AND NOT APPLE AND NOT WIN32)
    get_property(map GLOBAL PROPERTY ACCGRAPH_PLUGIN_MAP)
    target_link_options(${target} PRIVATE "LINKER:--version-script=${map}")
    set_property(TARGET ${target} APPEND PROPERTY LINK_DEPENDS "${map}")
  endif()
endfunction()

function(accgraph_add_plugin target)
  cmake_parse_arguments(ARG "" "" "SOURCES" ${ARGN})
  if(NOT ARG_SOURCES)
    message(FATAL_ERROR "accgraph_add_plugin(${target}): give the plugin's SOURCES")
  endif()
  add_library(${target} MODULE ${ARG_SOURCES})
  target_link_libraries(${target} PRIVATE accgraph::accgraph)
  target_compile_features(${target} PRIVATE cxx_std_17)
  set_target_properties(${target} PROPERTIES PREFIX "lib")
  accgraph_plugin_exports(${target})
endfunction()
