# Sanitizer builds, each in its own build folder (docs/fuzzing.md):
#   TROUPE_SANITIZE  the whole suite under ASan+UBSan (scripts/test.sh --sanitize, build-asan)
#   TROUPE_FUZZ      the libFuzzer targets of fuzz/ with ASan+UBSan; clang only
#                    (scripts/fuzz.sh, build-fuzz); builds only what the targets link
option(TROUPE_SANITIZE "Build everything with -fsanitize=address,undefined" OFF)
option(TROUPE_FUZZ "Build the libFuzzer targets of fuzz/ (clang)" OFF)

if(TROUPE_SANITIZE OR TROUPE_FUZZ)
  # -O2 keeps the suite fast enough; frame pointers give the reports whole stacks.
  set(_troupe_san -fsanitize=address,undefined -fno-omit-frame-pointer -g)
  if(TROUPE_FUZZ)
    # A UBSan report aborts the fuzz run. The suite keeps UBSan recoverable instead:
    # suppressions (scripts/sanitize.supp) only apply to recoverable checks, and
    # UBSAN_OPTIONS=halt_on_error=1 still stops at any report not suppressed.
    list(APPEND _troupe_san -fno-sanitize-recover=undefined)
  endif()
  add_compile_options("$<$<COMPILE_LANGUAGE:CXX>:${_troupe_san};-O2>")
  add_link_options(-fsanitize=address,undefined)
endif()

if(TROUPE_FUZZ)
  if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
    message(FATAL_ERROR "TROUPE_FUZZ needs clang++ (libFuzzer): configure with "
                        "-DCMAKE_CXX_COMPILER=clang++ (scripts/fuzz.sh does)")
  endif()
  # Coverage feedback for every library the targets link; the hooks' main comes at link.
  add_compile_options("$<$<COMPILE_LANGUAGE:CXX>:-fsanitize=fuzzer-no-link>")
endif()
