# Debian packages with CPack: `cpack -G DEB` in a build configured with
# -DCMAKE_INSTALL_PREFIX=/usr (so that GNUInstallDirs picks Debian's
# multiarch libdir; tests/packaging/deb_test.sh does exactly this).
#
#   gkcd         the daemon, the gkc command, units, sysusers, tmpfiles,
#                /etc/gkcd/gkcd.conf.example (a conffile; postinst copies it
#                to gkcd.conf when absent), manual pages, bash completion.
#                It links no CUDA library: it serves from the CPU backend
#                unless gkcd-cuda is installed (and a GPU is there).
#   gkcd-cuda    the CUDA backend module, ${libdir}/gkc/gkcd-cuda.so, which
#                gkcd loads at start-up (daemon/cuda_module.h); depends on the
#                CUDA runtime libraries.  Only from a build with CUDA.
#   libgkc3      libgkc.so.3 and libgkc_uv.so.3 (SONAME 3, hence the name)
#   libgkc-dev   headers, static libraries, .so links, gkc.pc, CMake config,
#                gkc.h(3)
#   python3-gkc  the pure-Python package (Architecture: all)
#
# Dependencies on shared libraries come from dpkg-shlibdeps (dpkg-dev),
# except the CUDA libraries of gkcd-cuda: a toolkit from NVIDIA's runfile
# belongs to no package, so they are named by GKC_DEB_CUDA_DEPENDS (below).
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME gkc)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_VENDOR "gkc")
set(CPACK_PACKAGE_CONTACT "gkc maintainers <gkc@localhost>")
# No CPACK_PACKAGE_DESCRIPTION_SUMMARY: CPackDeb would put it above each
# component's own first line.
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_ALL daemon lib dev python)
if(GKC_HAVE_CUDA)
  list(APPEND CPACK_COMPONENTS_ALL cuda)
endif()
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_RELEASE 1)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS ON) # libgkc3's shlibs, and ldconfig triggers
set(CPACK_DEBIAN_PACKAGE_HOMEPAGE "https://github.com/")
set(_deb_ver "${PROJECT_VERSION}-${CPACK_DEBIAN_PACKAGE_RELEASE}")

set(CPACK_DEBIAN_DAEMON_PACKAGE_NAME gkcd)
set(CPACK_DEBIAN_DAEMON_PACKAGE_SECTION misc)
set(CPACK_DEBIAN_DAEMON_PACKAGE_RECOMMENDS "systemd")
# Suggests, not Recommends: on a machine without a GPU, gkcd-cuda would pull
# in the CUDA libraries (a gigabyte of cuBLAS) for nothing.
set(CPACK_DEBIAN_DAEMON_PACKAGE_SUGGESTS "gkcd-cuda, prometheus, python3-gkc")
set(CPACK_DEBIAN_DAEMON_DESCRIPTION "GPU compute daemon: sgemm, reduce, spmv and solvers over a Unix socket
gkcd computes dense and sparse linear algebra for other processes, which
talk to it over a Unix socket (msgpack-rpc) with libgkc, the gkc command
or the Python package.  It runs on an NVIDIA GPU with the gkcd-cuda
package, and on the CPU (OpenBLAS, OpenMP) otherwise.  This package holds the daemon,
its systemd socket and service, the gkc command-line client (with gkc top
and gkc metrics) and their manual pages.")
set(CPACK_DEBIAN_DAEMON_PACKAGE_CONTROL_EXTRA
    "${CMAKE_SOURCE_DIR}/packaging/deb/gkcd/postinst;${CMAKE_SOURCE_DIR}/packaging/deb/gkcd/prerm;${CMAKE_SOURCE_DIR}/packaging/deb/gkcd/postrm;${CMAKE_SOURCE_DIR}/packaging/deb/gkcd/conffiles")
set(CPACK_DEBIAN_DAEMON_PACKAGE_CONTROL_STRICT_PERMISSION TRUE)

set(CPACK_DEBIAN_LIB_PACKAGE_NAME libgkc${GKC_SOVERSION})
set(CPACK_DEBIAN_LIB_PACKAGE_SECTION libs)
set(CPACK_DEBIAN_LIB_DESCRIPTION "client library of gkcd, the GPU compute daemon
libgkc sends requests to gkcd over its Unix socket, blocking or
asynchronously (with an adapter for libuv loops).")

set(CPACK_DEBIAN_DEV_PACKAGE_NAME libgkc-dev)
set(CPACK_DEBIAN_DEV_PACKAGE_SECTION libdevel)
# The static library needs msgpack-c; gkc_uv.h includes uv.h.
if(EXISTS /usr/include/msgpack.h)
  execute_process(COMMAND dpkg-query -S /usr/include/msgpack.h OUTPUT_VARIABLE _msgpack_pkg
                  ERROR_QUIET OUTPUT_STRIP_TRAILING_WHITESPACE)
  string(REGEX REPLACE ":.*" "" _msgpack_pkg "${_msgpack_pkg}")
endif()
if(NOT _msgpack_pkg)
  set(_msgpack_pkg "libmsgpack-c-dev | libmsgpack-dev")
endif()
set(CPACK_DEBIAN_DEV_PACKAGE_DEPENDS "libgkc${GKC_SOVERSION} (= ${_deb_ver}), ${_msgpack_pkg}, libuv1-dev")
set(CPACK_DEBIAN_DEV_DESCRIPTION "client library of gkcd: development files
Headers (gkc.h with gkc_solve.h, gkc_async.h, gkc_uv.h), static libraries, pkg-config files
and the CMake package (find_package(gkc)) of libgkc, and gkc.h(3).")

set(CPACK_DEBIAN_PYTHON_PACKAGE_NAME python3-gkc)
set(CPACK_DEBIAN_PYTHON_PACKAGE_SECTION python)
set(CPACK_DEBIAN_PYTHON_PACKAGE_ARCHITECTURE all)
set(CPACK_DEBIAN_PYTHON_PACKAGE_SHLIBDEPS OFF)
set(CPACK_DEBIAN_PYTHON_PACKAGE_DEPENDS "python3, python3-msgpack, python3-numpy")
set(CPACK_DEBIAN_PYTHON_PACKAGE_SUGGESTS "python3-scipy, gkcd")
set(CPACK_DEBIAN_PYTHON_DESCRIPTION "Python client of gkcd, the GPU compute daemon
The gkc package: NumPy arrays and SciPy sparse matrices in, results out,
resident arrays, shared memory regions and an asyncio client.")

# gkcd-cuda: its CUDA libraries by package name.  The package that owns each
# library file when dpkg knows it; else NVIDIA's repository name or Debian's
# (lib<name><SONAME version>) for this toolkit.  -DGKC_DEB_CUDA_DEPENDS=...
# to name them yourself.
if(GKC_HAVE_CUDA)
  set(GKC_DEB_CUDA_DEPENDS "" CACHE STRING
      "Depends of the gkcd-cuda package (empty: worked out from the CUDA toolkit found)")
  set(_cuda_deps "${GKC_DEB_CUDA_DEPENDS}")
  if(NOT _cuda_deps)
    set(_cuda_deps "")
    set(_tk "${CUDAToolkit_VERSION_MAJOR}-${CUDAToolkit_VERSION_MINOR}")
    foreach(_lib cudart cublas cusparse)
      get_target_property(_file CUDA::${_lib} IMPORTED_LOCATION)
      file(REAL_PATH "${_file}" _file)
      set(_pkg "")
      execute_process(COMMAND dpkg-query -S "${_file}" OUTPUT_VARIABLE _pkg ERROR_QUIET
                      OUTPUT_STRIP_TRAILING_WHITESPACE)
      string(REGEX REPLACE ":.*" "" _pkg "${_pkg}")
      if(NOT _pkg)
        string(REGEX MATCH "\\.so\\.([0-9]+)" _m "${_file}")
        set(_nvidia "lib${_lib}-${_tk}")
        if(_lib STREQUAL "cudart")
          set(_nvidia "cuda-cudart-${_tk}")
        endif()
        set(_pkg "${_nvidia} | lib${_lib}${CMAKE_MATCH_1}")
      endif()
      list(APPEND _cuda_deps "${_pkg}")
    endforeach()
    list(JOIN _cuda_deps ", " _cuda_deps)
  endif()
  set(CPACK_DEBIAN_CUDA_PACKAGE_NAME gkcd-cuda)
  set(CPACK_DEBIAN_CUDA_PACKAGE_SECTION misc)
  set(CPACK_DEBIAN_CUDA_PACKAGE_DEPENDS "gkcd (= ${_deb_ver}), ${_cuda_deps}")
  set(CPACK_DEBIAN_CUDA_DESCRIPTION "CUDA backend of gkcd, the GPU compute daemon
The module that lets gkcd compute on an NVIDIA GPU (its own kernels beside
cuBLAS, CUB and cuSPARSE).  gkcd loads it at start-up; without it, or
without a usable GPU, gkcd serves from the CPU backend.")
  message(STATUS "gkc: the gkcd-cuda package will depend on: ${_cuda_deps}")
endif()

include(CPack)
