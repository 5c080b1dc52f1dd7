# gkc_install_configured(TEMPLATE DESTINATION [RENAME NAME] [COPYONLY] [COMPONENT C])
#
# install(FILES) for a file that names installed paths (gkc.pc, gkcd.service):
# the file is written at install time, from TEMPLATE, with the prefix that
# install uses, so `cmake --install BUILD --prefix P` gets paths below P, not
# below the CMAKE_INSTALL_PREFIX of configure time.
#
# TEMPLATE is configured with @ONLY, after GNUInstallDirs has recomputed every
# CMAKE_INSTALL_FULL_<dir> from the install prefix (with its special cases:
# prefix /usr puts SYSCONFDIR in /etc, /opt/X in /etc/opt/X), keeping the
# relative CMAKE_INSTALL_<dir> of configure time, where install(TARGETS) put
# the files. PROJECT_VERSION is defined too. DESTINATION may hold the same
# @CMAKE_INSTALL_FULL_<dir>@ placeholders; a relative one is below the prefix.
# COPYONLY installs TEMPLATE as it is (for a DESTINATION that needs the
# install-time dirs). DESTDIR and install_manifest.txt work as for
# install(FILES). The install-time half is install_configured.cmake.
set(_gkc_install_configured_script "${CMAKE_CURRENT_LIST_DIR}/install_configured.cmake")
set(_gkc_gnu_dirs BINDIR SBINDIR LIBEXECDIR SYSCONFDIR SHAREDSTATEDIR LOCALSTATEDIR
    RUNSTATEDIR LIBDIR INCLUDEDIR OLDINCLUDEDIR DATAROOTDIR DATADIR INFODIR LOCALEDIR
    MANDIR DOCDIR)

function(gkc_install_configured template destination)
  cmake_parse_arguments(PARSE_ARGV 2 arg "COPYONLY" "RENAME;COMPONENT" "")
  get_filename_component(template "${template}" ABSOLUTE)
  if(NOT arg_RENAME)
    get_filename_component(arg_RENAME "${template}" NAME)
    string(REGEX REPLACE "\\.in$" "" arg_RENAME "${arg_RENAME}")
  endif()
  # Bracket arguments: the values are written into cmake_install.cmake as
  # they are, without a second round of ${} or @@ expansion here.
  set(code "")
  foreach(dir IN LISTS _gkc_gnu_dirs)
    string(APPEND code "set(CMAKE_INSTALL_${dir} [==[${CMAKE_INSTALL_${dir}}]==])\n")
  endforeach()
  string(APPEND code
    "set(PROJECT_VERSION [==[${PROJECT_VERSION}]==])\n"
    "set(GKC_TEMPLATE [==[${template}]==])\n"
    "set(GKC_DESTINATION [==[${destination}]==])\n"
    "set(GKC_NAME [==[${arg_RENAME}]==])\n"
    "set(GKC_COPYONLY [==[${arg_COPYONLY}]==])\n"
    "set(GKC_STAGING [==[${CMAKE_CURRENT_BINARY_DIR}/install-time]==])\n"
    "include([==[${_gkc_install_configured_script}]==])\n")
  if(arg_COMPONENT)
    install(CODE "${code}" COMPONENT ${arg_COMPONENT})
  else()
    install(CODE "${code}")
  endif()
endfunction()
