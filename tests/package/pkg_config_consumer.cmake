# Builds the package consumer with the flags `pkg-config --cflags --libs accgraph` gives for the
# installed package, and runs it.
# -DPREFIX -DLIBDIR -DSOURCE=<consumer.cpp> -DOUTPUT=<executable> -DCXX=<compiler>
set(ENV{PKG_CONFIG_PATH} "${PREFIX}/${LIBDIR}/pkgconfig")
execute_process(COMMAND pkg-config --cflags --libs accgraph RESULT_VARIABLE code
  OUTPUT_VARIABLE flags ERROR_VARIABLE err OUTPUT_STRIP_TRAILING_WHITESPACE)
if(NOT code EQUAL 0)
  message(FATAL_ERROR "pkg-config --cflags --libs accgraph failed: ${err}")
endif()
message("pkg-config: ${flags}")
separate_arguments(flags UNIX_COMMAND "${flags}")
execute_process(COMMAND "${CXX}" -std=c++17 "${SOURCE}" -o "${OUTPUT}" ${flags}
  "-Wl,-rpath,${PREFIX}/${LIBDIR}" RESULT_VARIABLE code OUTPUT_VARIABLE out ERROR_VARIABLE out)
if(NOT code EQUAL 0)
  message(FATAL_ERROR "compiling ${SOURCE} with the pkg-config flags failed:\n${out}")
endif()
execute_process(COMMAND "${OUTPUT}" RESULT_VARIABLE code OUTPUT_VARIABLE out ERROR_VARIABLE out)
message("${out}")
if(NOT code EQUAL 0)
  message(FATAL_ERROR "the pkg-config consumer failed (${code})")
endif()
