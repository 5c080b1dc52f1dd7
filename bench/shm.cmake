# bench_shm: inline bytes against libgkc's shared-memory arena, by array
# size, to place the arena's default threshold (GKC_SHM_DEFAULT_THRESHOLD).
add_executable(bench_shm bench_shm.c)
target_link_libraries(bench_shm PRIVATE gkc_bench_common gkc_static m)

# A smoke test (a second or two, small sizes): both paths run and agree.
# It asserts no figure.
add_test(NAME bench_shm_quick COMMAND bench_shm --gkcd $<TARGET_FILE:gkcd> --max 65536 --time 5 --reps 3)
set_tests_properties(bench_shm_quick PROPERTIES LABELS bench TIMEOUT 120)

# bench_inline: inline (no shared memory) GB/s of reduce and download on 1
# and on 8 connections at once (issue #25; bench/RESULTS.md).  Its smoke
# test runs small sizes on 1 and 2 connections, checks every result and
# asserts no figure.
add_executable(bench_inline bench_inline.c)
target_link_libraries(bench_inline PRIVATE gkc_bench_common gkc_static Threads::Threads m)
add_test(NAME bench_inline_quick COMMAND bench_inline --gkcd $<TARGET_FILE:gkcd> --min 65536 --max 1048576
         --conns 1,2 --time 20 --reps 2)
set_tests_properties(bench_inline_quick PROPERTIES LABELS bench TIMEOUT 120)

# bench_onecopy: by value (arena, inline) against the region path plus one
# memcpy, reduce 256 MiB and sgemm 2048^3 (issue #25's CPU-backend target;
# bench/RESULTS.md).  Too big for a smoke test: run by hand.
add_executable(bench_onecopy bench_onecopy.c)
target_link_libraries(bench_onecopy PRIVATE gkc_bench_common gkc_static m)
