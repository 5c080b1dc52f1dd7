# bench_rpc: round-trip time and requests/s of gkcd's request path (ping and a
# 16-float reduce), 1 and 16 connections, sequential and pipelined, measured
# beside a raw Unix-socket echo server as the floor.  See bench/README.md;
# bench/rpc/rpc.h lists its parts.
add_executable(bench_rpc bench_rpc.c echo_server.c rpc/client.c rpc/cputime.c rpc/measure.c
               rpc/options.c rpc/output.c rpc/pin.c rpc/request.c rpc/servers.c rpc/stats.c)
target_link_libraries(bench_rpc PRIVATE gkc_bench_common gkc_static gkc_proto Threads::Threads m)

# A smoke test (about 5 s): proves the bench runs end to end against the gkcd
# just built.  It asserts no performance figure; run the full bench by hand.
add_test(NAME bench_rpc_quick COMMAND bench_rpc --quick --gkcd $<TARGET_FILE:gkcd>)
set_tests_properties(bench_rpc_quick PROPERTIES LABELS bench TIMEOUT 120)
