# End-to-end tests: each starts a real gkcd on a temporary socket.
add_library(gkc_fixture STATIC fixture.c rawrpc.c probe.c)
target_include_directories(gkc_fixture PUBLIC ${CMAKE_CURRENT_SOURCE_DIR})
target_link_libraries(gkc_fixture PUBLIC gkc_static gkc_proto gkcio Threads::Threads m)

set(GKC_E2E_ENV "GKCD_BIN=$<TARGET_FILE:gkcd>;GKC_TEST_DATA=${CMAKE_CURRENT_SOURCE_DIR}/data;GKC_SHARED_MATRICES=${CMAKE_SOURCE_DIR}/../shared/matrices;GKC_FAULT_INJECTION=$<BOOL:${GKC_FAULT_INJECTION}>;GKC_SANITIZE=$<BOOL:${GKC_SANITIZE}>")

if(TARGET gkc)
  list(APPEND GKC_E2E_ENV "GKC_BIN=$<TARGET_FILE:gkc>")
endif()

function(gkc_e2e_test name)
  add_executable(${name} ${name}.c)
  target_link_libraries(${name} PRIVATE gkc_fixture gkc_cpu)
  add_test(NAME ${name} COMMAND ${name})
  set_tests_properties(${name} PROPERTIES SKIP_RETURN_CODE 77 LABELS e2e TIMEOUT 300
    ENVIRONMENT "${GKC_E2E_ENV}")
endfunction()

foreach(t e2e_lib e2e_errors e2e_lengths e2e_pipeline e2e_lifecycle e2e_soak e2e_service e2e_resident
        e2e_sched e2e_solve_lib e2e_devices e2e_partition)
  if(EXISTS ${CMAKE_CURRENT_SOURCE_DIR}/${t}.c)
    gkc_e2e_test(${t})
  endif()
endforeach()

# e2e_soak's request mix is its own file (soak_requests.c, soak.h).
if(TARGET e2e_soak)
  target_sources(e2e_soak PRIVATE soak_requests.c)
endif()

# The load tests measure (e2e_sched: shares of the work; e2e_soak: every
# reply under a 1024-request load): never two of them at once under ctest -j.
foreach(t e2e_soak e2e_sched)
  if(TARGET ${t})
    set_tests_properties(${t} PROPERTIES RESOURCE_LOCK gkc_load)
  endif()
endforeach()

# Issue 10, hardening: clients that do not read, send slowly, flood or hoard
# connections (tests/ROBUSTNESS.md, "Attacks and the limits that stop them").
foreach(t e2e_backpressure e2e_timeouts)
  if(EXISTS ${CMAKE_CURRENT_SOURCE_DIR}/${t}.c)
    gkc_e2e_test(${t})
  endif()
endforeach()
# All the attacks at once for GKC_HOSTILE_SECONDS (default 60; 25 under the
# sanitizers), beside well-behaved clients.
if(EXISTS ${CMAKE_CURRENT_SOURCE_DIR}/e2e_hostile.c)
  gkc_e2e_test(e2e_hostile)
  set_tests_properties(e2e_hostile PROPERTIES TIMEOUT 400)
endif()

# libgkc's async context, with its libuv adapter.
if(EXISTS ${CMAKE_CURRENT_SOURCE_DIR}/e2e_async.c)
  gkc_e2e_test(e2e_async)
  target_link_libraries(e2e_async PRIVATE gkc_uv_static)
endif()
# gkcd's error notifications, from a fake server (no gkcd needed).
if(EXISTS ${CMAKE_CURRENT_SOURCE_DIR}/e2e_notify.c)
  gkc_e2e_test(e2e_notify)
endif()

# The daemon's CUDA backend, end to end; reports skipped without a GPU.
if(GKC_HAVE_CUDA)
  gkc_e2e_test(e2e_gpu)
  set_tests_properties(e2e_gpu PROPERTIES LABELS "gpu;e2e")
  # Lanes on, off and on the fallback (GKCD_CUDA_LANES=streams, sliced bulk).
  gkc_e2e_test(e2e_lanes)
  set_tests_properties(e2e_lanes PROPERTIES LABELS "gpu;e2e")
  # Several devices on the GPU: one GPU cut in two (--split-device 2).
  # Skipped (77) where gkcd cannot serve two CUDA devices.
  add_test(NAME e2e_devices_gpu COMMAND e2e_devices)
  set_tests_properties(e2e_devices_gpu PROPERTIES LABELS "gpu;e2e" SKIP_RETURN_CODE 77 TIMEOUT 300
    ENVIRONMENT "${GKC_E2E_ENV};GKC_DEVICES_ARGS=--backend cuda --split-device 2")
endif()
if(TARGET e2e_partition)
  add_test(NAME e2e_partition_gpu COMMAND e2e_partition)
  set_tests_properties(e2e_partition_gpu PROPERTIES LABELS "gpu;e2e" SKIP_RETURN_CODE 77 TIMEOUT 300
    ENVIRONMENT "${GKC_E2E_ENV};GKC_DEVICES_ARGS=--backend cuda --split-device 2")
endif()

# The gkc CLI (e2e_cli.sh), and its batch command (e2e_cli_batch.sh): shared
# helpers in cli_test_lib.sh.
if(TARGET gkc)
  foreach(t e2e_cli e2e_cli_batch)
    add_test(NAME ${t} COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/${t}.sh
             $<TARGET_FILE:gkcd> $<TARGET_FILE:gkc>)
    set_tests_properties(${t} PROPERTIES LABELS e2e TIMEOUT 300 SKIP_RETURN_CODE 77
      ENVIRONMENT "${GKC_E2E_ENV}")
  endforeach()
endif()
if(EXISTS ${CMAKE_CURRENT_SOURCE_DIR}/e2e_python.py)
  add_test(NAME e2e_python COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/e2e_python.py)
  set_tests_properties(e2e_python PROPERTIES LABELS e2e TIMEOUT 300 SKIP_RETURN_CODE 77
    ENVIRONMENT "${GKC_E2E_ENV}")
endif()

# The Python package (python/gkc) under pytest, against a gkcd of this build.
# The interpreter must have msgpack, numpy, scipy and pytest: Debian's
# /usr/bin/python3 with tests/install-deps.sh's packages (a python3 earlier on
# PATH, such as a pyenv one, may lack them).  pytest's own exit status is the
# test's: any failure, and also "no tests collected" (5), fails it.
set(GKC_TEST_PYTHON /usr/bin/python3 CACHE FILEPATH "Python with msgpack, numpy, scipy and pytest for tests/python")
if(EXISTS ${CMAKE_CURRENT_SOURCE_DIR}/python/conftest.py)
  add_test(NAME python_pytest
           COMMAND ${GKC_TEST_PYTHON} -m pytest -p no:cacheprovider -q -rsx
                   ${CMAKE_CURRENT_SOURCE_DIR}/python)
  set_tests_properties(python_pytest PROPERTIES LABELS e2e TIMEOUT 600
    ENVIRONMENT "${GKC_E2E_ENV};GKC_BUILD_DIR=${CMAKE_BINARY_DIR};GKC_CMAKE=${CMAKE_COMMAND};PYTHONDONTWRITEBYTECODE=1")
endif()

# solve and batch through raw msgpack-rpc, against SciPy and NumPy.
foreach(t e2e_solve e2e_batch)
  if(EXISTS ${CMAKE_CURRENT_SOURCE_DIR}/${t}.py)
    add_test(NAME ${t} COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/${t}.py)
    set_tests_properties(${t} PROPERTIES LABELS e2e TIMEOUT 600 SKIP_RETURN_CODE 77
      ENVIRONMENT "${GKC_E2E_ENV}")
  endif()
endforeach()
# The same on the CUDA backend: ctest -L gpu; skipped without a GPU.
if(GKC_HAVE_CUDA)
  foreach(t e2e_solve e2e_batch)
    add_test(NAME ${t}_gpu COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/${t}.py)
    set_tests_properties(${t}_gpu PROPERTIES LABELS "gpu;e2e" TIMEOUT 600 SKIP_RETURN_CODE 77
      ENVIRONMENT "${GKC_E2E_ENV};GKC_TEST_BACKEND=cuda")
  endforeach()
endif()

# The error, resident-data and service tests, split by subject; the checks
# each group shares are in errcheck.c, resutil.c and svcutil.c.
target_sources(gkc_fixture PRIVATE errcheck.c resutil.c svcutil.c)
foreach(t e2e_errors_frames e2e_errors_args e2e_errors_sizes e2e_errors_busy e2e_errors_faults
        e2e_errors_hostile e2e_service_systemd e2e_service_config e2e_service_conns
        e2e_service_budget e2e_service_deadline e2e_resident_regions e2e_resident_handles
        e2e_resident_matrices e2e_resident_raw e2e_resident_cg)
  gkc_e2e_test(${t})
endforeach()
