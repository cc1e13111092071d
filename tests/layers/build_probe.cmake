# Builds one layer probe (tests/layers/CMakeLists.txt) and checks the outcome.
# -DBUILD_DIR=<build tree> -DTARGET=<probe> -DHEADER=<the header it includes> -DEXPECT=PASS|FAIL
execute_process(COMMAND "${CMAKE_COMMAND}" --build "${BUILD_DIR}" --target "${TARGET}"
  RESULT_VARIABLE code OUTPUT_VARIABLE out ERROR_VARIABLE err)
set(log "${out}${err}")
if(EXPECT STREQUAL "PASS")
  if(NOT code EQUAL 0)
    message(FATAL_ERROR "${TARGET}: including \"${HEADER}\" should compile in this layer, and "
                        "did not (the probe is set up unlike the layer, or the header moved):\n"
                        "${log}")
  endif()
  message("${TARGET}: \"${HEADER}\" compiles, as it should")
else()
  if(code EQUAL 0)
    message(FATAL_ERROR "${TARGET}: including \"${HEADER}\" compiled, but this layer must not "
                        "see that header: an include directory reaches past the layer's folder "
                        "(Note [Layer targets])")
  endif()
  string(REGEX REPLACE "([][+.*()^$])" "\\\\\\1" header_pattern "${HEADER}")
  # A private header is not found; an installed header the layer's CANNOT_INCLUDE names stops
  # the compile with the layer's own error.
  set(not_found "${header_pattern}: No such file or directory|'${header_pattern}' file not found")
  set(not_for_layer "cannot include ${header_pattern} \\(Note \\[Layer targets\\]")
  if(NOT log MATCHES "${not_found}|${not_for_layer}")
    message(FATAL_ERROR "${TARGET}: the build failed, but not because \"${HEADER}\" was not "
                        "found or is not for this layer:\n${log}")
  endif()
  message("${TARGET}: \"${HEADER}\" is not found or not for this layer, as it should not be")
endif()
