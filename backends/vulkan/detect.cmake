# The Vulkan backend's detection, run by accgraph_backend() (cmake/AccgraphBackends.cmake): only
# the headers are needed at build time (the module dlopen()s the loader, Note [Loading the
# loader] in backends/vulkan/vulkan_api.cpp); glslangValidator, when found, compiles the spin
# shader behind Stream::delay.
find_package(Vulkan QUIET COMPONENTS glslangValidator)
if(NOT TARGET Vulkan::Headers)
  find_package(Vulkan QUIET)
endif()
if(TARGET Vulkan::Headers)
  set(accgraph_backend_found ON)
else()
  set(accgraph_backend_missing "CMake found no Vulkan headers: install libvulkan-dev (Debian)")
endif()
