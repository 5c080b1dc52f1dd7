# bench_shm: inline bytes against libgkc's shared-memory arena, by array
# size, to place the arena's default threshold (GKC_SHM_DEFAULT_THRESHOLD).
add_executable(bench_shm bench_shm.c)
target_link_libraries(bench_shm PRIVATE gkc_bench_common gkc_static m)

# A smoke test (a second or two, small sizes): both paths run and agree.
# It asserts no figure.
add_test(NAME bench_shm_quick COMMAND bench_shm --gkcd $<TARGET_FILE:gkcd> --max 65536 --time 5 --reps 3)
set_tests_properties(bench_shm_quick PROPERTIES LABELS bench TIMEOUT 120)
