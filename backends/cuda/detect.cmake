# The CUDA backend's detection, run by accgraph_backend() (cmake/AccgraphBackends.cmake) at the
# top-level scope: the CUDA Toolkit and a CUDA compiler.
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
  set(accgraph_backend_found ON)
  # Enabled here, at the top-level scope, because the cuda backend, its tests and its
  # benchmark all compile .cu files (CMake requires the common parent directory).
  enable_language(CUDA)
else()
  string(CONCAT accgraph_backend_missing "no CUDA compiler/toolkit was found: install the CUDA "
    "Toolkit, and point CMake at it if it is not on PATH (-DCUDAToolkit_ROOT=/usr/local/cuda, or "
    "-DCMAKE_CUDA_COMPILER=<nvcc>),")
endif()
