# gkc: the command-line client (included from client/, next to libgkc).
add_executable(gkc gkc_cli.c cli_opts.c cli_out.c cli_conn.c cli_files.c cli_rand.c
               cli_check.c cli_limits.c cli_info.c cli_sgemm.c cli_reduce.c cli_vec.c cli_csr.c cli_spmv.c
               cli_solve.c cli_metrics.c cli_top.c cli_batch.c)
target_link_libraries(gkc PRIVATE gkc_static gkcio m)
install(TARGETS gkc RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT daemon)
