# Runs the conformance suite on level_zero after checking that the environment selects the
# capture path the test is named after.
# -DPATH_CHECK=test_level_zero_backend -DCONFORMANCE=accgraph-conformance
# (environment: ZE_ENABLE_ALT_DRIVERS, ACCGRAPH_TEST_EXPECT_CAPTURE, optionally ZE_ACCGRAPH_CPU_NO_GRAPH)
execute_process(COMMAND "${PATH_CHECK}" "--test-case=driver: the capture path*"
                RESULT_VARIABLE code OUTPUT_VARIABLE out ERROR_VARIABLE err)
message("${out}${err}")
if(NOT code EQUAL 0)
  message(FATAL_ERROR "level_zero does not use the capture path '$ENV{ACCGRAPH_TEST_EXPECT_CAPTURE}'")
endif()
execute_process(COMMAND "${CONFORMANCE}" --backend level_zero
                RESULT_VARIABLE code OUTPUT_VARIABLE out ERROR_VARIABLE err)
message("${out}${err}")
if(NOT code EQUAL 0)
  message(FATAL_ERROR "the conformance suite failed on level_zero (exit code ${code})")
endif()
if(NOT "${out}${err}" MATCHES "level_zero: test cases: [0-9]+ \\| [1-9][0-9]* passed \\| 0 failed")
  message(FATAL_ERROR "no passing level_zero summary in the conformance output")
endif()
