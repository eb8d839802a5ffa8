# Warnings for our own targets. They become errors when CI is set in the
# environment, so a warning never lands unseen.
add_library(ringmaster_warnings INTERFACE)
target_compile_options(ringmaster_warnings INTERFACE -Wall -Wextra -Wpedantic)
if(DEFINED ENV{CI} AND NOT "$ENV{CI}" STREQUAL "" AND NOT "$ENV{CI}" STREQUAL "false")
  target_compile_options(ringmaster_warnings INTERFACE -Werror)
  message(STATUS "CI is set: warnings are errors")
endif()
