# gkc-mpi's tests (included when gkc-mpi is built).
# The partition and halo plan: no MPI, no daemon.
gkc_unit_test(test_mpi_halo gkc_mpi_halo m)

# Ranks on two gkcd over mpirun: 1, 2 and 4 ranks against a float64
# reference, bad input, and a daemon killed mid-solve.  Skips (77) when
# mpirun is missing at run time.
if(TARGET mpi_cg)
  # gkcm_scatter_csr on its own: the rows each rank gets, and bad row_ptr refused.
  add_executable(mpi_scatter mpi_scatter.c)
  target_include_directories(mpi_scatter PRIVATE ${CMAKE_CURRENT_SOURCE_DIR})
  target_link_libraries(mpi_scatter PRIVATE gkc-mpi)
  add_test(NAME e2e_mpi COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/e2e_mpi.py)
  set_tests_properties(e2e_mpi PROPERTIES LABELS e2e TIMEOUT 240 SKIP_RETURN_CODE 77
    ENVIRONMENT "${GKC_E2E_ENV};GKC_MPI_CG=$<TARGET_FILE:mpi_cg>;GKC_CG=$<TARGET_FILE:cg>;GKC_MPI_SCATTER=$<TARGET_FILE:mpi_scatter>;GKC_MPIRUN=${GKC_MPIRUN}")
endif()
