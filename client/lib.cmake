# libgkc: the client library, shared and static, with the pieces of proto/
# it needs compiled in so that users link one library.
set(GKC_LIB_SOURCES gkc_wire.c gkc_reconnect.c gkc_client.c gkc_async.c gkc_methods.c gkc_reply.c gkc_json.c gkc_region.c
    gkc_objects.c gkc_resident.c gkc_shm.c gkc_shm_region.c gkc_shm_keep.c gkc_shm_pages.c gkc_solve.c
    gkc_ring.c gkc_ring_io.c
    ${CMAKE_SOURCE_DIR}/proto/proto_frame.c ${CMAKE_SOURCE_DIR}/proto/proto_tables.c
    ${CMAKE_SOURCE_DIR}/proto/proto_rpc.c ${CMAKE_SOURCE_DIR}/proto/proto_socket.c ${CMAKE_SOURCE_DIR}/proto/proto_ring.c)

# SONAME libgkc.so.${GKC_SOVERSION} (set in the top-level CMakeLists.txt).
set(GKC_LIB_VERSION ${GKC_SOVERSION}.0.0)

add_library(gkc_shared SHARED ${GKC_LIB_SOURCES})
add_library(gkc_static STATIC ${GKC_LIB_SOURCES})
foreach(t gkc_shared gkc_static)
  target_include_directories(${t} PUBLIC
    $<BUILD_INTERFACE:${CMAKE_CURRENT_SOURCE_DIR}> $<BUILD_INTERFACE:${CMAKE_SOURCE_DIR}/proto>
    $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
endforeach()
# By name rather than through the gkc_msgpack target, which is not exported.
if(GKC_STATIC_DEPS)
  set(GKC_MSGPACK_LINK ${MSGPACK_STATIC})
else()
  set(GKC_MSGPACK_LINK msgpackc)
endif()
target_link_libraries(gkc_shared PRIVATE ${GKC_MSGPACK_LINK})
target_link_libraries(gkc_static PRIVATE ${GKC_MSGPACK_LINK})
set_target_properties(gkc_shared PROPERTIES OUTPUT_NAME gkc EXPORT_NAME gkc VERSION ${GKC_LIB_VERSION} SOVERSION ${GKC_SOVERSION}
  C_VISIBILITY_PRESET hidden PUBLIC_HEADER "gkc.h;gkc_solve.h;gkc_async.h;${CMAKE_SOURCE_DIR}/proto/gkc_errors.h")
set_target_properties(gkc_static PROPERTIES OUTPUT_NAME gkc EXPORT_NAME gkc_static)
# Only the gkc_ functions of gkc.h are exported from the shared library.
target_compile_definitions(gkc_shared PRIVATE GKC_BUILDING_SHARED)

# libgkc_uv: the libuv adapter (gkc_uv.h), apart so that libgkc needs no libuv.
# libuv by name, as msgpack above: the pkg-config target is not exported.
if(GKC_STATIC_DEPS)
  set(GKC_UV_LINK PkgConfig::LIBUV)
else()
  set(GKC_UV_LINK uv)
endif()
add_library(gkc_uv_shared SHARED gkc_uv.c)
add_library(gkc_uv_static STATIC gkc_uv.c)
if(GKC_STATIC_DEPS)
  # A static libuv is not position-independent: the shared adapter takes
  # libuv's symbols from the program that uses it (which links libuv anyway).
  target_link_libraries(gkc_uv_shared PUBLIC gkc_shared)
else()
  target_link_libraries(gkc_uv_shared PUBLIC gkc_shared PRIVATE ${GKC_UV_LINK})
endif()
target_link_libraries(gkc_uv_static PUBLIC gkc_static PRIVATE ${GKC_UV_LINK})
target_compile_definitions(gkc_uv_shared PRIVATE GKC_BUILDING_SHARED)
set_target_properties(gkc_uv_shared PROPERTIES OUTPUT_NAME gkc_uv EXPORT_NAME gkc_uv
  VERSION ${GKC_LIB_VERSION} SOVERSION ${GKC_SOVERSION} C_VISIBILITY_PRESET hidden PUBLIC_HEADER gkc_uv.h)
set_target_properties(gkc_uv_static PROPERTIES OUTPUT_NAME gkc_uv EXPORT_NAME gkc_uv_static)

include(CMakePackageConfigHelpers)
# Components: the shared libraries (lib: libgkc3), everything to build
# against them (dev: libgkc-dev); see cmake/Packaging.cmake.
install(TARGETS gkc_shared gkc_static gkc_uv_shared gkc_uv_static EXPORT gkcTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT lib NAMELINK_COMPONENT dev
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT dev
  PUBLIC_HEADER DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} COMPONENT dev)
install(EXPORT gkcTargets NAMESPACE gkc:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/gkc COMPONENT dev)
configure_package_config_file(${CMAKE_CURRENT_SOURCE_DIR}/gkcConfig.cmake.in
  ${CMAKE_CURRENT_BINARY_DIR}/gkcConfig.cmake INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/gkc)
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/gkcConfigVersion.cmake
  COMPATIBILITY SameMajorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/gkcConfig.cmake
  ${CMAKE_CURRENT_BINARY_DIR}/gkcConfigVersion.cmake DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/gkc
  COMPONENT dev)
# gkc.pc and gkc-uv.pc name the install prefix: written at install time (--prefix included).
include(${CMAKE_SOURCE_DIR}/cmake/InstallConfigured.cmake)
gkc_install_configured(gkc.pc.in ${CMAKE_INSTALL_LIBDIR}/pkgconfig COMPONENT dev)
gkc_install_configured(gkc-uv.pc.in ${CMAKE_INSTALL_LIBDIR}/pkgconfig COMPONENT dev)

include(cli.cmake OPTIONAL)
