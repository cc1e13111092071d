# Runs check_trace.py TRACE EXPECTED with the Python that has the `perfetto` package (the venv of
# scripts/perfetto-venv.sh). Without that Python the check prints SKIPPED (ctest: skipped), unless
# ACCGRAPH_REQUIRE_PERFETTO_PYTHON=1 is set (scripts/test.sh sets it): then it fails.
# -DPYTHON=path -DSCRIPT=check_trace.py -DTRACE=file.pftrace -DEXPECTED=file.json -DVENV=dir
macro(skip_or_fail reason)
  if("$ENV{ACCGRAPH_REQUIRE_PERFETTO_PYTHON}" STREQUAL "1")
    message(FATAL_ERROR "${reason} (ACCGRAPH_REQUIRE_PERFETTO_PYTHON=1: the check must run)")
  endif()
  message("SKIPPED: ${reason}")
  return()
endmacro()

if(NOT EXISTS "${PYTHON}")
  skip_or_fail("no Python with the perfetto package at ${PYTHON}: create it with "
               "`bash scripts/perfetto-venv.sh ${VENV}` (pip install perfetto protobuf) to decode "
               "the trace with Perfetto's own protos")
endif()
execute_process(COMMAND "${PYTHON}" -c "import perfetto.protos.perfetto.trace.perfetto_trace_pb2"
  RESULT_VARIABLE import_code ERROR_VARIABLE import_error)
if(NOT import_code EQUAL 0)
  skip_or_fail("${PYTHON} cannot import the perfetto package's protos (${import_error}): run "
               "`bash scripts/perfetto-venv.sh ${VENV}`")
endif()
execute_process(COMMAND "${PYTHON}" "${SCRIPT}" "${TRACE}" "${EXPECTED}"
  RESULT_VARIABLE code OUTPUT_VARIABLE out ERROR_VARIABLE err)
message("${out}${err}")
if(NOT code EQUAL 0)
  message(FATAL_ERROR "${TRACE} does not hold what ${EXPECTED} expects (check_trace.py above)")
endif()
