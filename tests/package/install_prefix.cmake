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
        include/accgraph/report.hpp include/accgraph/stats.hpp include/accgraph/exporters.hpp
        include/accgraph/spi/backend.hpp include/accgraph/spi/clock_sampling.hpp
        include/accgraph/spi/plugin.h include/accgraph/spi/plugin.hpp
        include/accgraph/spi/priority.hpp include/accgraph/spi/native_call.hpp
        include/accgraph/spi/pool_table.hpp include/accgraph/spi/steady_clock_markers.hpp
        include/accgraph/spi/worker_queue.hpp include/accgraph/spi/library_check.hpp
        include/accgraph/spi/message_escape.hpp include/accgraph/spi/ownership.hpp
        include/accgraph/spi/stream_cast.hpp include/accgraph/spi/device_index.hpp
        include/accgraph/spi/handle_table.hpp include/accgraph/spi/first_failure.hpp
        include/accgraph/spi/run_every_node.hpp include/accgraph/spi/host_delay.hpp
        include/accgraph/spi/host_memory_buffer.hpp include/accgraph/spi/debug_dump.hpp
        # the 0.1 paths, forwarding to the ones above until 0.3 (Note [Forwarding headers])
        include/accgraph/backend.hpp include/accgraph/backend_support.hpp
        include/accgraph/native_call.hpp include/accgraph/plugin.h include/accgraph/plugin.hpp
        include/accgraph/pool_table.hpp include/accgraph/priority.hpp
        include/accgraph/steady_clock_markers.hpp include/accgraph/worker_queue.hpp
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
