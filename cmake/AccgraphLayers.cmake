# The layers of libaccgraph as build targets (Note [Layer targets]).
#
# Note [Layer targets]
# ~~~~~~~~~~~~~~~~~~~~
# libaccgraph is made of layers: core/, registry/, the timing layers and the built-in host
# backend. The timing layers stand in this order, each only on those below it: timing/model/ (the
# report model and the statistics) at the bottom; timing/engine/ (what records and collects) and
# timing/export/ (the writers) on the model, neither on the other; timing/facade/ (the Profiler)
# on both. Each layer is an OBJECT library of its own whose PRIVATE include directories are its
# own folder and the installed headers (include/: the public API and the SPI), nothing else. A
# layer that needs another's internals names the narrow interface target that exposes them:
# - accgraph_support: support/, the utilities every layer may use (utf8.hpp: the UTF-8 check and
#   valid text);
# - accgraph_timing_seam: core/seam/, the core's seam for the timing layer (timing_seam.hpp and
#   the stream state it hands over; Note [Graph instruments]);
# - accgraph_timing_engine_internals: timing/engine/, the engine's units, for the facade;
# - accgraph_export_support: timing/export/'s helpers shared by libaccgraph's exporters and
#   accgraph::perfetto (trace_layout, exported_text, export_errors), a static library that both
#   link, so that neither compiles the other's sources.
# The installed headers are on every layer's path, so their direction is stated per layer:
# CANNOT_INCLUDE names the public headers a layer must not reach, directly or through another
# header (for example the model: spi/backend.hpp, timing.hpp, exporters.hpp; the engine:
# exporters.hpp; core: timing.hpp). Each gets, first on the layer's include path, a stand-in
# that stops the compile with "#error ... cannot include <header>", as GN's include check does
# for declared deps.
# So a wrong include (the registry reaching into a backend, timing into core/internal/, the engine
# into the exporters) fails to compile instead of waiting for a review; tests/layers/ checks that
# it does, and that no library source includes with "../".
#
# Every layer compiles with the same settings (accgraph_layer_settings): C++17, the installed
# headers, ACCGRAPH_BUILDING_LIBRARY, fmt and nlohmann_json, hidden visibility and PIC (set for
# the whole project in the top-level CMakeLists.txt).

add_library(accgraph_layer_settings INTERFACE)
target_compile_features(accgraph_layer_settings INTERFACE cxx_std_17)
target_include_directories(accgraph_layer_settings INTERFACE "${PROJECT_SOURCE_DIR}/include")
target_compile_definitions(accgraph_layer_settings INTERFACE ACCGRAPH_BUILDING_LIBRARY
  ACCGRAPH_MODULE_SUBDIR="${ACCGRAPH_MODULE_SUBDIR}")
target_link_libraries(accgraph_layer_settings INTERFACE fmt::fmt nlohmann_json::nlohmann_json
  Threads::Threads)

add_library(accgraph_support INTERFACE)
target_include_directories(accgraph_support INTERFACE "${PROJECT_SOURCE_DIR}/support")

add_library(accgraph_timing_seam INTERFACE)
target_include_directories(accgraph_timing_seam INTERFACE "${PROJECT_SOURCE_DIR}/core/seam")

# accgraph_add_layer(NAME <name> SOURCES ... [USES <interface targets>...]
#                    [CANNOT_INCLUDE <installed headers>...])
# An OBJECT library accgraph_layer_<name> of SOURCES (relative to the calling folder), including
# that folder and the installed headers only, plus what the USES targets expose, and none of the
# CANNOT_INCLUDE headers (paths as included: "accgraph/timing.hpp"); its objects go into
# libaccgraph.
function(accgraph_add_layer)
  cmake_parse_arguments(ARG "" "NAME" "SOURCES;USES;CANNOT_INCLUDE" ${ARGN})
  if(NOT ARG_NAME OR NOT ARG_SOURCES)
    message(FATAL_ERROR "accgraph_add_layer: give the layer's NAME and its SOURCES")
  endif()
  set(target accgraph_layer_${ARG_NAME})
  add_library(${target} OBJECT ${ARG_SOURCES})
  target_include_directories(${target} PRIVATE "${CMAKE_CURRENT_SOURCE_DIR}")
  accgraph_layer_cannot_include(${target} ${ARG_NAME} ${ARG_CANNOT_INCLUDE})
  target_link_libraries(${target} PRIVATE accgraph_layer_settings ${ARG_USES})
  accgraph_warnings(${target})
  # What tests/layers/ gives its probes (with the layer's INCLUDE_DIRECTORIES), to compile them
  # as this layer is compiled.
  set_target_properties(${target} PROPERTIES ACCGRAPH_LAYER_USES "${ARG_USES}")
  target_sources(accgraph PRIVATE $<TARGET_OBJECTS:${target}>)
endfunction()

# The stand-ins of the headers a layer cannot include (Note [Layer targets]), in a folder of the
# build tree searched before include/; written afresh at each configure, so a rule taken out
# leaves no stand-in behind.
function(accgraph_layer_cannot_include target layer)
  set(folder "${CMAKE_CURRENT_BINARY_DIR}/${target}_cannot_include")
  file(REMOVE_RECURSE "${folder}")
  if(NOT ARGN)
    return()
  endif()
  foreach(header IN LISTS ARGN)
    if(NOT EXISTS "${PROJECT_SOURCE_DIR}/include/${header}")
      message(FATAL_ERROR "accgraph_add_layer(${layer}): CANNOT_INCLUDE ${header} names no "
                          "installed header: give its path under include/ (accgraph/...)")
    endif()
    file(WRITE "${folder}/${header}"
      "#error \"the ${layer} layer cannot include ${header} (Note [Layer targets] in "
      "cmake/AccgraphLayers.cmake): include what the layer may use, or move the code to the "
      "layer that may\"\n")
  endforeach()
  target_include_directories(${target} BEFORE PRIVATE "${folder}")
endfunction()
