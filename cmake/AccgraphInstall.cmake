# Install rules: the library, headers (the user API in include/accgraph/, the backend authors'
# kit in include/accgraph/spi/, and the 0.1 paths that forward to it), the CMake
# package (find_package(accgraph CONFIG) giving accgraph::accgraph and accgraph_add_plugin()), a
# version file and a pkg-config file; and the same package exported from the build tree
# (find_package(accgraph) with accgraph_DIR=<build dir>, as fmt does).
include(CMakePackageConfigHelpers)

set(ACCGRAPH_CMAKE_DIR "${CMAKE_INSTALL_LIBDIR}/cmake/accgraph")

install(TARGETS accgraph EXPORT accgraphTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(DIRECTORY "${PROJECT_SOURCE_DIR}/include/accgraph" DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(EXPORT accgraphTargets NAMESPACE accgraph:: DESTINATION "${ACCGRAPH_CMAKE_DIR}")

# The plugin ABI major, read from the one place it is set (include/accgraph/spi/plugin.h).
file(STRINGS "${PROJECT_SOURCE_DIR}/include/accgraph/spi/plugin.h" ACCGRAPH_PLUGIN_ABI_MAJOR
  REGEX "^#define ACCGRAPH_PLUGIN_ABI_MAJOR [0-9]+u$")
string(REGEX REPLACE "^#define ACCGRAPH_PLUGIN_ABI_MAJOR ([0-9]+)u$" "\\1" ACCGRAPH_PLUGIN_ABI_MAJOR
  "${ACCGRAPH_PLUGIN_ABI_MAJOR}")
if(NOT ACCGRAPH_PLUGIN_ABI_MAJOR MATCHES "^[0-9]+$")
  message(FATAL_ERROR "cmake/AccgraphInstall.cmake: no '#define ACCGRAPH_PLUGIN_ABI_MAJOR <n>u' "
                      "line in include/accgraph/spi/plugin.h; keep that define on one line")
endif()
configure_package_config_file("${PROJECT_SOURCE_DIR}/cmake/accgraphConfig.cmake.in"
  "${PROJECT_BINARY_DIR}/accgraphConfig.cmake"
  INSTALL_DESTINATION "${ACCGRAPH_CMAKE_DIR}")
# At 0.x a minor release may change the plugin ABI and the API: find_package(accgraph 0.2) accepts
# 0.2.x only. (At 1.0 this becomes SameMajorVersion.)
if(PROJECT_VERSION_MAJOR EQUAL 0)
  set(accgraph_compatibility SameMinorVersion)
else()
  set(accgraph_compatibility SameMajorVersion)
endif()
write_basic_package_version_file("${PROJECT_BINARY_DIR}/accgraphConfigVersion.cmake"
  VERSION ${PROJECT_VERSION} COMPATIBILITY ${accgraph_compatibility})
install(FILES "${PROJECT_BINARY_DIR}/accgraphConfig.cmake"
  "${PROJECT_BINARY_DIR}/accgraphConfigVersion.cmake"
  "${PROJECT_SOURCE_DIR}/cmake/accgraphPlugin.cmake"
  "${PROJECT_SOURCE_DIR}/cmake/accgraph_plugin.map"
  DESTINATION "${ACCGRAPH_CMAKE_DIR}")

# The build-tree package: accgraphConfig.cmake and its version file are already in the build
# directory; the targets and the plugin helper join them there.
export(EXPORT accgraphTargets NAMESPACE accgraph::
  FILE "${PROJECT_BINARY_DIR}/accgraphTargets.cmake")
configure_file("${PROJECT_SOURCE_DIR}/cmake/accgraphPlugin.cmake"
  "${PROJECT_BINARY_DIR}/accgraphPlugin.cmake" COPYONLY)
configure_file("${PROJECT_SOURCE_DIR}/cmake/accgraph_plugin.map"
  "${PROJECT_BINARY_DIR}/accgraph_plugin.map" COPYONLY)

# pkg-config: paths relative to the .pc file (${pcfiledir}), so the file is right for whatever
# prefix `cmake --install --prefix` picks and for a moved tree (CMAKE_INSTALL_PREFIX is only the
# configure-time default, /usr/local when none was given).
file(RELATIVE_PATH ACCGRAPH_PC_PREFIX_FROM_PCFILEDIR
  "/prefix/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "/prefix")
string(REGEX REPLACE "/$" "" ACCGRAPH_PC_PREFIX_FROM_PCFILEDIR "${ACCGRAPH_PC_PREFIX_FROM_PCFILEDIR}")
configure_file("${PROJECT_SOURCE_DIR}/cmake/accgraph.pc.in" "${PROJECT_BINARY_DIR}/accgraph.pc" @ONLY)
install(FILES "${PROJECT_BINARY_DIR}/accgraph.pc" DESTINATION "${CMAKE_INSTALL_LIBDIR}/pkgconfig")
