# Decides which vendor backends to build from ACCGRAPH_BACKEND_<NAME>=AUTO|ON|OFF and defines
# accgraph_add_backend(), the one way every built-in backend's CMakeLists.txt builds it.
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

set(ACCGRAPH_WITH_CUDA OFF)
if(NOT ACCGRAPH_BACKEND_CUDA STREQUAL "OFF" AND EXISTS "${PROJECT_SOURCE_DIR}/backends/cuda/CMakeLists.txt")
  # The toolkit first: FindCUDAToolkit honours CUDAToolkit_ROOT, CUDA_PATH and nvcc on PATH and
  # knows the platform's default install locations, so the compiler is taken from the toolkit
  # found (unless CMAKE_CUDA_COMPILER or CUDACXX names one) instead of a machine-specific path.
  find_package(CUDAToolkit QUIET)
  if(NOT DEFINED CMAKE_CUDA_COMPILER AND NOT DEFINED ENV{CUDACXX} AND CUDAToolkit_NVCC_EXECUTABLE)
    set(CMAKE_CUDA_COMPILER "${CUDAToolkit_NVCC_EXECUTABLE}")
  endif()
  include(CheckLanguage)
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER AND CUDAToolkit_FOUND)
    set(ACCGRAPH_WITH_CUDA ON)
    # Enabled here, at the top-level scope, because the cuda backend, its tests and its
    # benchmark all compile .cu files (CMake requires the common parent directory).
    enable_language(CUDA)
  elseif(ACCGRAPH_BACKEND_CUDA STREQUAL "ON")
    message(FATAL_ERROR "ACCGRAPH_BACKEND_CUDA=ON but no CUDA compiler/toolkit was found: "
      "install the CUDA Toolkit, and point CMake at it if it is not on PATH "
      "(-DCUDAToolkit_ROOT=/usr/local/cuda, or -DCMAKE_CUDA_COMPILER=<nvcc>), or set "
      "ACCGRAPH_BACKEND_CUDA=AUTO|OFF")
  endif()
endif()
message(STATUS "accgraph: cuda backend ${ACCGRAPH_WITH_CUDA}")

set(ACCGRAPH_WITH_LEVEL_ZERO OFF)
if(NOT ACCGRAPH_BACKEND_LEVEL_ZERO STREQUAL "OFF" AND EXISTS "${PROJECT_SOURCE_DIR}/backends/level_zero/CMakeLists.txt")
  find_package(PkgConfig QUIET)
  if(PkgConfig_FOUND)
    pkg_check_modules(LevelZero QUIET IMPORTED_TARGET libze_loader)
  endif()
  if(LevelZero_FOUND)
    set(ACCGRAPH_WITH_LEVEL_ZERO ON)
  elseif(ACCGRAPH_BACKEND_LEVEL_ZERO STREQUAL "ON")
    message(FATAL_ERROR "ACCGRAPH_BACKEND_LEVEL_ZERO=ON but pkg-config found no libze_loader: "
      "install libze-dev (Debian) or set ACCGRAPH_BACKEND_LEVEL_ZERO=AUTO|OFF")
  endif()
endif()
message(STATUS "accgraph: level_zero backend ${ACCGRAPH_WITH_LEVEL_ZERO}")

# Vulkan: only the headers are needed at build time (the module dlopen()s the loader, Note
# [Loading the loader] in backends/vulkan/vulkan_api.cpp); glslangValidator, when found, compiles
# the spin shader behind Stream::delay.
set(ACCGRAPH_WITH_VULKAN OFF)
if(NOT ACCGRAPH_BACKEND_VULKAN STREQUAL "OFF" AND EXISTS "${PROJECT_SOURCE_DIR}/backends/vulkan/CMakeLists.txt")
  find_package(Vulkan QUIET COMPONENTS glslangValidator)
  if(NOT TARGET Vulkan::Headers)
    find_package(Vulkan QUIET)
  endif()
  if(TARGET Vulkan::Headers)
    set(ACCGRAPH_WITH_VULKAN ON)
  elseif(ACCGRAPH_BACKEND_VULKAN STREQUAL "ON")
    message(FATAL_ERROR "ACCGRAPH_BACKEND_VULKAN=ON but CMake found no Vulkan headers: "
      "install libvulkan-dev (Debian) or set ACCGRAPH_BACKEND_VULKAN=AUTO|OFF")
  endif()
endif()
message(STATUS "accgraph: vulkan backend ${ACCGRAPH_WITH_VULKAN}")
