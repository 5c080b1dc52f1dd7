# The daemon's CUDA backend (C, over the gkcu launchers); included from the
# top-level CMakeLists.txt after cuda/, so that daemon/ can link it.
# Its files in layers, lowest first (cuda/cuda_impl.h lists them).
add_library(gkc_cuda_backend STATIC
            ${CMAKE_SOURCE_DIR}/cuda/devcache.c
            ${CMAKE_SOURCE_DIR}/cuda/lanes.c
            ${CMAKE_SOURCE_DIR}/cuda/cuda_slice.c
            ${CMAKE_SOURCE_DIR}/cuda/cuda_gpu.c
            ${CMAKE_SOURCE_DIR}/cuda/cuda_ring.c
            ${CMAKE_SOURCE_DIR}/cuda/cuda_slot.c
            ${CMAKE_SOURCE_DIR}/cuda/cuda_rates.c
            ${CMAKE_SOURCE_DIR}/cuda/cuda_fail.c
            ${CMAKE_SOURCE_DIR}/cuda/cuda_multi.c
            ${CMAKE_SOURCE_DIR}/cuda/cuda_part.c
            ${CMAKE_SOURCE_DIR}/cuda/cuda_layout.c
            ${CMAKE_SOURCE_DIR}/cuda/cuda_sgemm.c
            ${CMAKE_SOURCE_DIR}/cuda/cuda_reduce.c
            ${CMAKE_SOURCE_DIR}/cuda/cuda_spmv.c
            ${CMAKE_SOURCE_DIR}/cuda/cuda_blas1.c
            ${CMAKE_SOURCE_DIR}/cuda/cuda_launch.c
            ${CMAKE_SOURCE_DIR}/cuda/cuda_array.c
            ${CMAKE_SOURCE_DIR}/cuda/cuda_tiny.c
            ${CMAKE_SOURCE_DIR}/cuda/cuda_upload.c
            ${CMAKE_SOURCE_DIR}/cuda/cuda_amg.c
            ${CMAKE_SOURCE_DIR}/cuda/cuda_solve.c
            ${CMAKE_SOURCE_DIR}/cuda/cuda_batch.c
            ${CMAKE_SOURCE_DIR}/cuda/cuda_run.c
            ${CMAKE_SOURCE_DIR}/cuda/cuda_backend.c)
target_include_directories(gkc_cuda_backend PRIVATE ${CMAKE_SOURCE_DIR}/daemon)
# gkc_cuda is C++ (CUB) linked by a C linker: its runtime libraries must come
# after it on the link line.
target_link_libraries(gkc_cuda_backend PUBLIC gkc_cuda gkc_cpu gkc_proto Threads::Threads OpenMP::OpenMP_C)
target_link_libraries(gkc_cuda_backend INTERFACE "$<LINK_ONLY:stdc++>" "$<LINK_ONLY:m>")

# gkcd-cuda.so: the backend as a module that gkcd dlopen()s (daemon/cuda_module.h),
# so that gkcd itself needs no CUDA library.  The archives' symbols are hidden
# (--exclude-libs): only the table of cuda_module_entry.c is exported, and the
# backend's calls into gkcd (daemon/gkcd.dynlist) stay undefined until gkcd
# loads it.  Built next to gkcd, where gkcd looks first (tests run uninstalled).
add_library(gkcd_cuda MODULE ${CMAKE_SOURCE_DIR}/cuda/cuda_module_entry.c)
target_include_directories(gkcd_cuda PRIVATE ${CMAKE_SOURCE_DIR}/daemon ${CMAKE_SOURCE_DIR}/client)
target_compile_definitions(gkcd_cuda PRIVATE GKC_HAVE_CUDA)
target_link_libraries(gkcd_cuda PRIVATE gkc_cuda_backend)
target_link_options(gkcd_cuda PRIVATE "LINKER:--exclude-libs,ALL")
set_target_properties(gkcd_cuda PROPERTIES PREFIX "" OUTPUT_NAME gkcd-cuda
  C_VISIBILITY_PRESET hidden
  LIBRARY_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/daemon)
install(TARGETS gkcd_cuda LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}/gkc COMPONENT cuda)
