# Warnings for our own targets. They become errors when CI is set in the
# environment, so a warning never lands unseen.
add_library(ringmaster_warnings INTERFACE)
target_compile_options(ringmaster_warnings INTERFACE -Wall -Wextra -Wpedantic)
if(DEFINED ENV{CI} AND NOT "$ENV{CI}" STREQUAL "" AND NOT "$ENV{CI}" STREQUAL "false")
  target_compile_options(ringmaster_warnings INTERFACE -Werror)
  message(STATUS "CI is set: warnings are errors")
endif()
# GCC 12 reports -Wrestrict falsely inside std::string's operator+ at -O2
# (GCC bug 105329, fixed in 13); it would turn correct code into errors.
if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU" AND CMAKE_CXX_COMPILER_VERSION VERSION_LESS 13)
  target_compile_options(ringmaster_warnings INTERFACE -Wno-restrict)
endif()
