# Install-time half of gkc_install_configured() (InstallConfigured.cmake):
# runs inside cmake_install.cmake, where CMAKE_INSTALL_PREFIX is the prefix
# of this install (--prefix, else the configured one). The caller has set
# CMAKE_INSTALL_<dir> (as configured), PROJECT_VERSION, GKC_TEMPLATE,
# GKC_DESTINATION, GKC_NAME, GKC_COPYONLY and GKC_STAGING.

# GNUInstallDirs keeps CMAKE_INSTALL_<dir> that are already defined (as plain
# variables) and derives CMAKE_INSTALL_FULL_<dir> from the current prefix.
include(GNUInstallDirs)

string(CONFIGURE "${GKC_DESTINATION}" _gkc_dest @ONLY)
if(NOT IS_ABSOLUTE "${_gkc_dest}")
  set(_gkc_dest "${CMAKE_INSTALL_PREFIX}/${_gkc_dest}")
endif()

# Written in the build tree first, then installed by file(INSTALL), which
# adds DESTDIR, prints "-- Installing:" and records the file in the manifest.
get_filename_component(_gkc_staged "${GKC_TEMPLATE}" NAME)
set(_gkc_staged "${GKC_STAGING}/${_gkc_staged}")
if(GKC_COPYONLY)
  configure_file("${GKC_TEMPLATE}" "${_gkc_staged}" COPYONLY)
else()
  configure_file("${GKC_TEMPLATE}" "${_gkc_staged}" @ONLY)
endif()
file(INSTALL DESTINATION "${_gkc_dest}" TYPE FILE FILES "${_gkc_staged}" RENAME "${GKC_NAME}")
