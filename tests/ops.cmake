# Operations: metrics (method and HTTP), gkc top, Debian packages, man pages
# and completion.
get_property(GKC_HAVE_MHD GLOBAL PROPERTY GKC_HAVE_MHD)
if(GKC_HAVE_MHD)
  set(GKC_HAVE_MHD 1)
else()
  set(GKC_HAVE_MHD 0)
endif()
add_test(NAME e2e_metrics COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/e2e_metrics.sh
         $<TARGET_FILE:gkcd> $<TARGET_FILE:gkc> ${GKC_HAVE_MHD})
set_tests_properties(e2e_metrics PROPERTIES LABELS e2e TIMEOUT 120 SKIP_RETURN_CODE 77)

# Manual pages render without warnings; bash completion offers commands.
add_test(NAME man_completion COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/man_test.sh
         ${CMAKE_BINARY_DIR} ${CMAKE_SOURCE_DIR} $<TARGET_FILE:gkc>)
set_tests_properties(man_completion PROPERTIES LABELS e2e TIMEOUT 60 SKIP_RETURN_CODE 77)

# Debian packages: build (its own CPU-only build tree), dpkg -i, gkc ping,
# dpkg --purge.  Root only; skipped otherwise.  Not under sanitizers: it
# builds a release tree of its own anyway.
if(NOT GKC_SANITIZE AND NOT GKC_TSAN)
  add_test(NAME deb_packages COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/deb_test.sh ${CMAKE_SOURCE_DIR})
  set_tests_properties(deb_packages PROPERTIES LABELS deb TIMEOUT 1200 SKIP_RETURN_CODE 77 RUN_SERIAL TRUE)
endif()
