# accgraph_add_plugin(<target> SOURCES ...): builds an out-of-tree backend plugin as a MODULE
# library that links accgraph::accgraph and exports only its entry point (hidden visibility), so
# that `ACCGRAPH_PLUGIN_PATH=<dir>` or accgraph::load_plugin(<file>) can load it.
function(accgraph_add_plugin target)
  cmake_parse_arguments(ARG "" "" "SOURCES" ${ARGN})
  if(NOT ARG_SOURCES)
    message(FATAL_ERROR "accgraph_add_plugin(${target}): give the plugin's SOURCES")
  endif()
  add_library(${target} MODULE ${ARG_SOURCES})
  target_link_libraries(${target} PRIVATE accgraph::accgraph)
  target_compile_features(${target} PRIVATE cxx_std_17)
  set_target_properties(${target} PROPERTIES
    PREFIX "lib"
    CXX_VISIBILITY_PRESET hidden
    VISIBILITY_INLINES_HIDDEN ON)
endfunction()
