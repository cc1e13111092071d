# Decides which vendor backends to build from ACCGRAPH_BACKEND_<NAME>=AUTO|ON|OFF and defines
# accgraph_add_backend_module(), the one way a backend module is built.
include("${CMAKE_CURRENT_LIST_DIR}/accgraphPlugin.cmake")  # accgraph_plugin_exports()

# accgraph_add_backend_module(<name> SOURCES ...): a MODULE library accgraph_backend_<name>
# placed in lib/accgraph/ of the build and install trees, exporting only the plugin entry point
# (the version script of accgraph_plugin_exports(), the same as for out-of-tree plugins).
function(accgraph_add_backend_module name)
  cmake_parse_arguments(ARG "" "" "SOURCES" ${ARGN})
  set(target accgraph_backend_${name})
  add_library(${target} MODULE ${ARG_SOURCES})
  target_link_libraries(${target} PRIVATE accgraph::accgraph fmt::fmt)
  target_compile_features(${target} PRIVATE cxx_std_17)
  set_target_properties(${target} PROPERTIES
    PREFIX "lib"
    LIBRARY_OUTPUT_DIRECTORY "${ACCGRAPH_MODULE_OUTPUT_DIRECTORY}"
    INSTALL_RPATH "$ORIGIN/..")
  accgraph_plugin_exports(${target})
  accgraph_warnings(${target})
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
