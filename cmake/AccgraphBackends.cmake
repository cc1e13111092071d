# Defines accgraph_backend(), the one call per vendor backend that decides from
# ACCGRAPH_BACKEND_<NAME>=AUTO|ON|OFF whether to build it, and accgraph_add_backend(), the one way
# every built-in backend's CMakeLists.txt builds it.
include("${CMAKE_CURRENT_LIST_DIR}/accgraphPlugin.cmake")  # accgraph_plugin_exports()

# accgraph_backends: every backend module built here, for a build of what the `accgraph` program
# runs on without the tests (quickstart.sh: --target accgraph_cli accgraph_backends).
add_custom_target(accgraph_backends)

# accgraph_add_backend(NAME <name> [BUILT_IN] SOURCES ... [LIBS ...]
#                      [SUPPORT_SOURCES ... SUPPORT_LIBS ...])
# - BUILT_IN: the SOURCES are compiled into libaccgraph (the host backend, registered by the
#   core's built-in list); nothing else may be given.
# - otherwise a MODULE library accgraph_backend_<name> placed in lib/accgraph/ of the build and
#   install trees, exporting only the plugin entry point (the version script of
#   accgraph_plugin_exports(), the same as for out-of-tree plugins), linking LIBS privately and
#   including the backend's folder and backends/ (backends/common/: helpers only in-tree
#   backends share).
# - SUPPORT_SOURCES: the backend's pure helpers as a static library accgraph_<name>_support
#   (linked by the module, and by tests/<name> to test them without a driver), which links
#   SUPPORT_LIBS publicly and gives the backend's folder as an include directory.
function(accgraph_add_backend)
  cmake_parse_arguments(ARG "BUILT_IN" "NAME" "SOURCES;LIBS;SUPPORT_SOURCES;SUPPORT_LIBS" ${ARGN})
  if(NOT ARG_NAME OR NOT ARG_SOURCES)
    message(FATAL_ERROR "accgraph_add_backend: give the backend's NAME and its SOURCES")
  endif()
  if(ARG_BUILT_IN)
    if(ARG_LIBS OR ARG_SUPPORT_SOURCES)
      message(FATAL_ERROR "accgraph_add_backend(NAME ${ARG_NAME} BUILT_IN): a built-in backend "
        "is compiled into libaccgraph: give it only SOURCES")
    endif()
    # A layer of libaccgraph (Note [Layer targets]): its own folder and the installed headers.
    accgraph_add_layer(NAME backend_${ARG_NAME} SOURCES ${ARG_SOURCES})
    return()
  endif()
  if(ARG_SUPPORT_SOURCES)
    set(support accgraph_${ARG_NAME}_support)
    add_library(${support} STATIC ${ARG_SUPPORT_SOURCES})
    target_link_libraries(${support} PUBLIC accgraph::accgraph ${ARG_SUPPORT_LIBS} PRIVATE fmt::fmt)
    target_include_directories(${support} PUBLIC "${CMAKE_CURRENT_SOURCE_DIR}")
    target_compile_features(${support} PUBLIC cxx_std_17)
    set_target_properties(${support} PROPERTIES POSITION_INDEPENDENT_CODE ON)
    accgraph_warnings(${support})
    list(APPEND ARG_LIBS ${support})
  endif()
  set(target accgraph_backend_${ARG_NAME})
  add_library(${target} MODULE ${ARG_SOURCES})
  target_link_libraries(${target} PRIVATE accgraph::accgraph fmt::fmt ${ARG_LIBS})
  # backends/ too, for the helpers only in-tree backends share: "common/<helper>.hpp".
  target_include_directories(${target} PRIVATE "${CMAKE_CURRENT_SOURCE_DIR}"
    "${PROJECT_SOURCE_DIR}/backends")
  target_compile_features(${target} PRIVATE cxx_std_17)
  set_target_properties(${target} PROPERTIES
    PREFIX "lib"
    LIBRARY_OUTPUT_DIRECTORY "${ACCGRAPH_MODULE_OUTPUT_DIRECTORY}"
    INSTALL_RPATH "$ORIGIN/..")
  accgraph_plugin_exports(${target})
  accgraph_warnings(${target})
  add_dependencies(accgraph_backends ${target})
  if(ACCGRAPH_INSTALL)
    install(TARGETS ${target} LIBRARY DESTINATION "${CMAKE_INSTALL_LIBDIR}/${ACCGRAPH_MODULE_SUBDIR}")
  endif()
endfunction()

# accgraph_backend(<name> TITLE <title> NEEDS <what to install> [TESTS <folder of tests/>...])
# One vendor backend, one call and one switch (as IREE keys each HAL driver on one
# IREE_HAL_DRIVER_<X>); the top-level CMakeLists.txt lists them. The call
# - defines the option ACCGRAPH_BACKEND_<NAME>=AUTO|ON|OFF ("Build the <title> backend");
# - runs the backend's detection, backends/<name>/detect.cmake, unless the option is OFF or the
#   folder has no CMakeLists.txt. The file runs at the caller's scope (this is a macro: the CUDA
#   detection enables a language, which CMake allows only at file scope); it sets
#   accgraph_backend_found to ON, or accgraph_backend_missing to what is missing and how to
#   install it, which ACCGRAPH_BACKEND_<NAME>=ON turns into a configure error;
# - sets ACCGRAPH_WITH_<NAME> ON or OFF, prints "accgraph: <name> backend ON|OFF", and when ON
#   adds backends/<name> and records the TESTS folders (default: <name>) that tests/CMakeLists.txt
#   adds, in the order of the calls;
# - gives the core's list of built-in modules (registry/builtin_backends.cpp) the backend's row,
#   built or not: its name, the priority its module's entry table declares (read from the
#   ACCGRAPH_DEFINE_PLUGIN line of backends/<name>/backend.cpp, the one place it is written) and
#   how to build it ("configure accgraph with <NEEDS> installed (ACCGRAPH_BACKEND_<NAME>=AUTO or
#   ON)").
macro(accgraph_backend accgraph_backend_name)
  accgraph_backend_declare(${accgraph_backend_name} ${ARGN})
  set(accgraph_backend_found OFF)
  set(accgraph_backend_missing "")
  if(accgraph_backend_detect)
    include("${PROJECT_SOURCE_DIR}/backends/${accgraph_backend_name}/detect.cmake")
  endif()
  accgraph_backend_decide(${accgraph_backend_name} ${ARGN})
  if(ACCGRAPH_WITH_${accgraph_backend_option})
    add_subdirectory(backends/${accgraph_backend_name})
  endif()
endmacro()

# The option and the registry row of accgraph_backend(); sets accgraph_backend_option (<NAME>)
# and accgraph_backend_detect in the caller's scope.
function(accgraph_backend_declare name)
  cmake_parse_arguments(ARG "" "TITLE;NEEDS" "TESTS" ${ARGN})
  if(NOT ARG_TITLE OR NOT ARG_NEEDS)
    message(FATAL_ERROR "accgraph_backend(${name}): give its TITLE (\"Build the <TITLE> backend\") "
      "and what it NEEDS installed (\"configure accgraph with <NEEDS> installed\")")
  endif()
  string(TOUPPER "${name}" option)
  set(ACCGRAPH_BACKEND_${option} AUTO CACHE STRING "Build the ${ARG_TITLE} backend (AUTO|ON|OFF)")
  set_property(CACHE ACCGRAPH_BACKEND_${option} PROPERTY STRINGS AUTO ON OFF)
  set(folder "${PROJECT_SOURCE_DIR}/backends/${name}")
  set(detect OFF)
  if(NOT ACCGRAPH_BACKEND_${option} STREQUAL "OFF" AND EXISTS "${folder}/CMakeLists.txt")
    set(detect ON)
  endif()
  if(EXISTS "${folder}/backend.cpp")
    set(entry_regex "ACCGRAPH_DEFINE_PLUGIN\\(\"${name}\", *accgraph::priority::([a-z_]+)")
    file(STRINGS "${folder}/backend.cpp" entry REGEX "${entry_regex}")
    if(NOT entry MATCHES "${entry_regex}")
      message(FATAL_ERROR "backends/${name}/backend.cpp has no "
        "'ACCGRAPH_DEFINE_PLUGIN(\"${name}\", accgraph::priority::<name>, ...' line, from which "
        "accgraph_backend() reads the priority the core lists the module with when it is "
        "absent: keep the entry on one line in that form")
    endif()
    set(how_to_build
      "configure accgraph with ${ARG_NEEDS} installed (ACCGRAPH_BACKEND_${option}=AUTO or ON)")
    set_property(GLOBAL APPEND PROPERTY ACCGRAPH_BUILTIN_MODULE_ROWS
      "    {\"${name}\", priority::${CMAKE_MATCH_1},\n     \"${how_to_build}\"},")
  endif()
  get_property(scheduled GLOBAL PROPERTY ACCGRAPH_BUILTIN_MODULES_SCHEDULED)
  if(NOT scheduled)
    set_property(GLOBAL PROPERTY ACCGRAPH_BUILTIN_MODULES_SCHEDULED ON)
    cmake_language(DEFER DIRECTORY "${PROJECT_SOURCE_DIR}" CALL accgraph_write_builtin_modules)
  endif()
  set(accgraph_backend_option ${option} PARENT_SCOPE)
  set(accgraph_backend_detect ${detect} PARENT_SCOPE)
endfunction()

# What accgraph_backend() decides from the detection's result: ACCGRAPH_WITH_<NAME> in the
# caller's scope, the status line, or the configure error of ACCGRAPH_BACKEND_<NAME>=ON.
function(accgraph_backend_decide name)
  cmake_parse_arguments(ARG "" "TITLE;NEEDS" "TESTS" ${ARGN})
  string(TOUPPER "${name}" option)
  if(accgraph_backend_detect AND NOT accgraph_backend_found
     AND ACCGRAPH_BACKEND_${option} STREQUAL "ON")
    message(FATAL_ERROR "ACCGRAPH_BACKEND_${option}=ON but ${accgraph_backend_missing} "
      "or set ACCGRAPH_BACKEND_${option}=AUTO|OFF")
  endif()
  set(found OFF)
  if(accgraph_backend_detect AND accgraph_backend_found)
    set(found ON)
    if(NOT ARG_TESTS)
      set(ARG_TESTS ${name})
    endif()
    set_property(GLOBAL APPEND PROPERTY ACCGRAPH_BACKEND_TEST_FOLDERS ${ARG_TESTS})
  endif()
  message(STATUS "accgraph: ${name} backend ${found}")
  set(ACCGRAPH_WITH_${option} ${found} PARENT_SCOPE)
endfunction()

# Writes the rows of every accgraph_backend() call into the table registry/builtin_backends.cpp
# includes (deferred to the end of the top-level CMakeLists.txt, after the last call).
function(accgraph_write_builtin_modules)
  get_property(rows GLOBAL PROPERTY ACCGRAPH_BUILTIN_MODULE_ROWS)
  list(JOIN rows "\n" rows)
  file(CONFIGURE OUTPUT "${PROJECT_BINARY_DIR}/generated/accgraph_builtin_modules.inc"
    CONTENT "// Generated by accgraph_backend() (cmake/AccgraphBackends.cmake): a row per backend.
${rows}
"
    @ONLY)
endfunction()
