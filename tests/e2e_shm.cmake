# libgkc's transparent shared memory (gkc.h, "transparent shared memory"):
# the blocking calls, the async context, and the gkc CLI's --no-shm; each
# starts its own gkcd (gkc_e2e_test, from e2e.cmake).
foreach(t e2e_shm_lib e2e_shm_async e2e_shm_cli)
  if(EXISTS ${CMAKE_CURRENT_SOURCE_DIR}/${t}.c)
    gkc_e2e_test(${t})
  endif()
endforeach()
