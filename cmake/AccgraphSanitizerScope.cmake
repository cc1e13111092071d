# What the asan and tsan builds leave out of `all`: the conformance mutants broken on purpose
# (tests/mutants, label mutant-broken), which their test presets do not run, since a sanitizer
# report on a mutant that races or uses freed work is the mutant doing its job (the ci preset runs
# them; the baseline mutant is built and run here too). 29 modules of toy_mutant.cpp less to
# compile per sanitizer build: a target that needs one still builds it (unit_test_fork_join_leave
# loads mutant 12). Their presets include this file through CMAKE_PROJECT_INCLUDE (after
# project()); the targets exist only once tests/ is read, so the work is deferred to the end of
# the top-level directory. `cmake --build ... --target accgraph_toy_mutant_<n>` still builds one.
cmake_language(DEFER DIRECTORY "${CMAKE_SOURCE_DIR}" CALL accgraph_leave_out_broken_mutants)

function(accgraph_leave_out_broken_mutants)
  if(NOT TARGET accgraph_toy_mutant_0)  # no tests in this build
    return()
  endif()
  get_property(targets DIRECTORY "${PROJECT_SOURCE_DIR}/tests/mutants" PROPERTY BUILDSYSTEM_TARGETS)
  foreach(target IN LISTS targets)
    if(target MATCHES "^accgraph_toy_mutant_[1-9][0-9]*$")
      set_property(TARGET ${target} PROPERTY EXCLUDE_FROM_ALL TRUE)
    endif()
  endforeach()
endfunction()
