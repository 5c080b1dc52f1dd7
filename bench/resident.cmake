# bench_resident: sgemm through the socket against shared-memory regions,
# spmv sending the matrix against a resident one, and CG with everything
# resident (examples/cg.c's solver), from the client's side.  Meant for the
# GPU machine (gkcd --backend cuda); runs on the CPU backend too.
add_executable(bench_resident bench_resident.c)
target_link_libraries(bench_resident PRIVATE gkc_bench_common gkc_static gkcio m)

# A smoke test (a few seconds, tiny sizes): the bench runs end to end
# against the gkcd just built.  It asserts no performance figure.
add_test(NAME bench_resident_quick COMMAND bench_resident --quick --gkcd $<TARGET_FILE:gkcd>)
set_tests_properties(bench_resident_quick PROPERTIES LABELS bench TIMEOUT 120)
