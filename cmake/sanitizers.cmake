# Whole-build instrumentation, applied to every target that follows (include before the first
# add_subdirectory):
#   CNN_SANITIZE=address,undefined  the whole CPU build and test suite under ASan + UBSan (any
#                                   -fsanitize= list the compiler takes); scripts/test.sh runs it.
#   CNN_FUZZ=ON                     the libFuzzer harnesses of tests/fuzz (clang only), with every
#                                   library compiled for coverage feedback under ASan + UBSan.
# Both imply a CPU-only build: nvcc cannot instrument device code, and the sanitizers' shadow memory
# does not mix with the CUDA driver's mappings. UBSan findings abort (-fno-sanitize-recover), so a
# test or a fuzzer run fails on them instead of printing a line that nobody reads.
set(CNN_SANITIZE "" CACHE STRING "Instrument the whole build with these sanitizers, e.g. address,undefined (CUDA off)")
option(CNN_FUZZ "Build the libFuzzer harnesses of tests/fuzz (needs clang; implies ASan + UBSan, CUDA off)" OFF)
set(CNN_FUZZ_SECONDS 20 CACHE STRING "How long each fuzz harness runs in the CTest label 'fuzz'")

set(CNN_SANITIZER_FLAGS "")
if(CNN_FUZZ)
  if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
    message(FATAL_ERROR "CNN_FUZZ=ON needs clang (libFuzzer): configure a fresh build folder with CC=clang CXX=clang++")
  endif()
  # fuzzer-no-link: coverage instrumentation without libFuzzer's main(), which only the harness
  # executables link (tests/fuzz/CMakeLists.txt).
  set(CNN_SANITIZER_FLAGS -fsanitize=fuzzer-no-link,address,undefined)
  # One thread: the parsers run on the calling thread, and OpenMP's worker threads would only add
  # noise to libFuzzer's coverage (and need clang's libomp).
  set(CNN_OPENMP OFF)
elseif(NOT CNN_SANITIZE STREQUAL "")
  set(CNN_SANITIZER_FLAGS -fsanitize=${CNN_SANITIZE})
endif()

if(CNN_SANITIZER_FLAGS)
  if(CNN_CUDA STREQUAL "ON")
    message(FATAL_ERROR "CNN_SANITIZE and CNN_FUZZ build the CPU backend only; drop -DCNN_CUDA=ON")
  endif()
  set(CNN_CUDA OFF)  # shadows the cache entry in this build only
  add_compile_options(${CNN_SANITIZER_FLAGS} -fno-sanitize-recover=undefined -fno-omit-frame-pointer -g)
  # The link step needs the sanitizers' runtimes; fuzzer-no-link has none of its own.
  string(REPLACE "fuzzer-no-link," "" link_flags "${CNN_SANITIZER_FLAGS}")
  add_link_options(${link_flags})
  # GCC warns of "maybe uninitialized" values in instrumented code that are not (libstdc++'s
  # <regex> among them; its manual says the sanitizers cause such false positives). Uninstrumented
  # builds keep the warning.
  if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
    list(APPEND CNN_WARNINGS -Wno-maybe-uninitialized)
  endif()
  message(STATUS "cnn: instrumented build (${CNN_SANITIZER_FLAGS}), CUDA off")
endif()
