# bench_mpi: Allreduce latency and halo-swap cost, for the CG scaling model
# of docs/CLUSTER.md (no gkcd).  bench/mpi_scaling.sh runs mpi_cg itself.
add_executable(bench_mpi bench_mpi.c)
target_link_libraries(bench_mpi PRIVATE MPI::MPI_C)
