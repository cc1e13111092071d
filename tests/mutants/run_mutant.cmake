# Runs the conformance driver on one toy_mutant plugin.
#   cmake -DCONFORMANCE=<accgraph-conformance> -DPLUGIN=<libaccgraph_toy_mutant_N.so>
#         -DRULE=<rule the mutant breaks, empty for the baseline> -P run_mutant.cmake
# Baseline: the suite must pass. A mutant: the suite must fail (exit code 1, not a crash, a
# timeout, a usage error or "unavailable"), and its output must name RULE as a failed rule
# ("FAILED ... rule RULE (Note [...]"), so the right case caught it.
execute_process(COMMAND "${CONFORMANCE}" --plugin "${PLUGIN}" --backend toy_mutant
                RESULT_VARIABLE code OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 150)
set(all "${out}${err}")
if(RULE STREQUAL "")
  message("${all}")
  if(NOT code EQUAL 0 OR NOT all MATCHES "toy_mutant: test cases: [0-9]+ \\| [0-9]+ passed \\| 0 failed")
    message(FATAL_ERROR "the unmodified toy_mutant baseline must pass the conformance suite "
                        "(exit code ${code})")
  endif()
  return()
endif()
# Which rules the suite named, for the log.
string(REGEX MATCHALL "\n  rule [a-z.-]+ \\(" named "${all}")
list(REMOVE_DUPLICATES named)
string(REPLACE "\n  rule " "" named "${named}")
string(REPLACE " (" "" named "${named}")
message("mutant breaking '${RULE}': exit code ${code}; rules named in failures: ${named}")
if(NOT code EQUAL 1)
  message("${all}")
  message(FATAL_ERROR "expected the conformance suite to fail (exit code 1) on the mutant "
                      "breaking '${RULE}', got '${code}'")
endif()
string(REPLACE "." "\\." rule_regex "${RULE}")
if(NOT all MATCHES "FAILED  [^\n]*\n  rule ${rule_regex} \\(Note \\[")
  message("${all}")
  message(FATAL_ERROR "the conformance suite failed on the mutant breaking '${RULE}' but no "
                      "failure names that rule: the case for it did not catch the mutant")
endif()
