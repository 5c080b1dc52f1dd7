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
