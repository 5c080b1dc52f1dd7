# The daemon's CUDA backend (C, over the gkcu launchers); included from the
# top-level CMakeLists.txt after cuda/, so that daemon/ can link it.
add_library(gkc_cuda_backend STATIC ${CMAKE_SOURCE_DIR}/cuda/cuda_backend.c
            ${CMAKE_SOURCE_DIR}/cuda/cuda_long.c
            ${CMAKE_SOURCE_DIR}/cuda/cuda_multi.c
            ${CMAKE_SOURCE_DIR}/cuda/cuda_solve.c
            ${CMAKE_SOURCE_DIR}/cuda/devcache.c
            ${CMAKE_SOURCE_DIR}/cuda/lanes.c
            ${CMAKE_SOURCE_DIR}/cuda/cuda_slice.c)
target_include_directories(gkc_cuda_backend PRIVATE ${CMAKE_SOURCE_DIR}/daemon)
# gkc_cuda is C++ (CUB) linked by a C linker: its runtime libraries must come
# after it on the link line.
target_link_libraries(gkc_cuda_backend PUBLIC gkc_cuda gkc_cpu gkc_proto Threads::Threads OpenMP::OpenMP_C)
target_link_libraries(gkc_cuda_backend INTERFACE "$<LINK_ONLY:stdc++>" "$<LINK_ONLY:m>")
