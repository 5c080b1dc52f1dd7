# fuzz.cmake: libFuzzer targets (tests/fuzz/), included from tests/CMakeLists.txt.
# Off by default; needs clang and its libFuzzer runtime:
#   CC=clang cmake -S . -B build/fuzz -DGKC_CUDA=OFF -DGKC_FUZZ=ON
#   cmake --build build/fuzz --target fuzz_request make_corpus && ctest --test-dir build/fuzz -L fuzz
option(GKC_FUZZ "Build the libFuzzer targets in tests/fuzz (clang only)" OFF)
if(GKC_FUZZ)
  add_subdirectory(fuzz)
endif()
