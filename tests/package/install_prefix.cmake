# The package tests' fixture: installs the build tree into a fresh prefix inside it and checks
# that the files users rely on are there (and that the pkg-config file forces no -std flag).
# -DBUILD_DIR=<build tree> -DPREFIX=<prefix, emptied first> -DLIBDIR=<CMAKE_INSTALL_LIBDIR>
file(REMOVE_RECURSE "${PREFIX}")
execute_process(COMMAND "${CMAKE_COMMAND}" --install "${BUILD_DIR}" --prefix "${PREFIX}"
  RESULT_VARIABLE code OUTPUT_VARIABLE out ERROR_VARIABLE out)
if(NOT code EQUAL 0)
  message(FATAL_ERROR "cmake --install ${BUILD_DIR} --prefix ${PREFIX} failed (${code}):\n${out}")
endif()
foreach(file IN ITEMS bin/accgraph bin/accgraph-conformance include/accgraph/accgraph.hpp
        include/accgraph/backend_support.hpp include/accgraph/steady_clock_markers.hpp
        include/accgraph/native_call.hpp include/accgraph/priority.hpp
        ${LIBDIR}/cmake/accgraph/accgraphConfig.cmake
        ${LIBDIR}/cmake/accgraph/accgraphConfigVersion.cmake
        ${LIBDIR}/cmake/accgraph/accgraphPlugin.cmake
        ${LIBDIR}/cmake/accgraph/accgraph_plugin.map ${LIBDIR}/pkgconfig/accgraph.pc)
  if(NOT EXISTS "${PREFIX}/${file}")
    message(FATAL_ERROR "the install is missing ${PREFIX}/${file}: add it to the install rules "
                        "(cmake/AccgraphInstall.cmake)")
  endif()
endforeach()
file(READ "${PREFIX}/${LIBDIR}/pkgconfig/accgraph.pc" pc)
if(pc MATCHES "-std=")
  message(FATAL_ERROR "accgraph.pc sets a language standard (it would downgrade a C++20 "
                      "consumer); give only include and library flags:\n${pc}")
endif()
message("installed into ${PREFIX}")
