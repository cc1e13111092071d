# Checks that the peak memory of a command does not grow with a count: runs
# MAXRSS COMMAND with COUNT_SMALL and with COUNT_LARGE in place of @COUNT@ and fails when the
# second run's peak RSS exceeds the first's by more than MAX_GROWTH_KIB.
# -DMAXRSS=path -DCOMMAND="prog|arg|...@COUNT@..." -DCOUNT_SMALL=N -DCOUNT_LARGE=M
# -DMAX_GROWTH_KIB=K
# Under AddressSanitizer, freed memory sits in a quarantine that would count as growth.
if(DEFINED ENV{ASAN_OPTIONS})
  set(ENV{ASAN_OPTIONS} "$ENV{ASAN_OPTIONS}:quarantine_size_mb=0")
else()
  set(ENV{ASAN_OPTIONS} "quarantine_size_mb=0")
endif()

function(peak_rss count result)
  string(REPLACE "@COUNT@" "${count}" command "${COMMAND}")
  string(REPLACE "|" ";" command "${command}")
  execute_process(COMMAND "${MAXRSS}" ${command} RESULT_VARIABLE code OUTPUT_VARIABLE out
    ERROR_VARIABLE err)
  if(NOT code EQUAL 0 OR NOT out MATCHES "maxrss_kib ([0-9]+)")
    message(FATAL_ERROR "${command} failed (${code}):\n${out}${err}")
  endif()
  set(${result} ${CMAKE_MATCH_1} PARENT_SCOPE)
endfunction()

peak_rss(${COUNT_SMALL} small)
peak_rss(${COUNT_LARGE} large)
math(EXPR growth "${large} - ${small}")
message("peak RSS: ${small} KiB with ${COUNT_SMALL}, ${large} KiB with ${COUNT_LARGE}: "
        "growth ${growth} KiB (at most ${MAX_GROWTH_KIB})")
if(growth GREATER MAX_GROWTH_KIB)
  message(FATAL_ERROR "peak memory grew by ${growth} KiB, more than ${MAX_GROWTH_KIB} KiB")
endif()
