# Warnings for our own targets. They become errors when CI is set in the
# environment, so a warning never lands unseen.
add_library(ringmaster_warnings INTERFACE)
# CUDA sources (nvcc) pass the host compiler's share through -Xcompiler;
# -Wpedantic stays off there, as nvcc's generated host code is not ISO C++.
target_compile_options(ringmaster_warnings INTERFACE $<$<COMPILE_LANGUAGE:CXX>:-Wall;-Wextra;-Wpedantic>
                                                     $<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=-Wall,-Wextra>)
if(DEFINED ENV{CI} AND NOT "$ENV{CI}" STREQUAL "" AND NOT "$ENV{CI}" STREQUAL "false")
  target_compile_options(ringmaster_warnings INTERFACE $<$<COMPILE_LANGUAGE:CXX>:-Werror>
                                                       $<$<COMPILE_LANGUAGE:CUDA>:-Werror=all-warnings>)
  message(STATUS "CI is set: warnings are errors")
endif()
# GCC 12 reports -Wrestrict falsely inside std::string's operator+ at -O2
# (GCC bug 105329, fixed in 13); it would turn correct code into errors.
# The same GCC, building for AArch64 or with ASan, reports
# -Wmismatched-new-delete inside Boost.Asio's coroutine frames
# (awaitable_frame_base's sized operator delete paired with its own
# operator new), also a false positive; with ASan at -O1 it also reports
# -Wmaybe-uninitialized inside libstdc++'s <regex> (std::function moved
# out of a regex automaton state), a known false positive of GCC 12.
if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU" AND CMAKE_CXX_COMPILER_VERSION VERSION_LESS 13)
  target_compile_options(ringmaster_warnings INTERFACE -Wno-restrict)
  if(CMAKE_SYSTEM_PROCESSOR MATCHES "aarch64|arm64" OR CMAKE_CXX_FLAGS MATCHES "sanitize=address")
    target_compile_options(ringmaster_warnings INTERFACE -Wno-mismatched-new-delete)
  endif()
  if(CMAKE_CXX_FLAGS MATCHES "sanitize=address")
    target_compile_options(ringmaster_warnings INTERFACE -Wno-maybe-uninitialized)
  endif()
endif()
# GCC says once per use that TSan does not see std::atomic_thread_fence
# (libstdc++'s shared_ptr and Asio use it); the tsan stage knows.
if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU" AND CMAKE_CXX_FLAGS MATCHES "sanitize=thread")
  target_compile_options(ringmaster_warnings INTERFACE -Wno-tsan)
endif()
