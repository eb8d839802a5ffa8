# Checks the object files compiled with instruction-set flags
# (engine/src/kernels/reduce_<level>.cpp): each may define, with external
# or weak linkage, only its level's table, `ringmaster::kernels::<level>::
# table`. Anything else (an inline function or a template from a header, a
# static data member) could be the copy the linker keeps for every caller,
# and then a CPU without that level would run it. Nor may such a unit run
# code at start-up (.init_array / .ctors), before cpu_supports() is asked.
#
#   cmake -DNM=nm -DOBJDUMP=objdump -DOBJECTS="a.o|b.o" -P isa_symbols.cmake
foreach(var NM OBJDUMP OBJECTS)
  if(NOT DEFINED ${var} OR "${${var}}" STREQUAL "")
    message(FATAL_ERROR "isa_symbols.cmake: -D${var}=... is required")
  endif()
endforeach()
string(REPLACE "|" ";" objects "${OBJECTS}")

set(failures "")
set(checked 0)
foreach(object IN LISTS objects)
  get_filename_component(name "${object}" NAME)
  if(NOT name MATCHES "^reduce_([a-z0-9]+)\\.cpp\\.o(bj)?$")
    continue()
  endif()
  set(level "${CMAKE_MATCH_1}")
  math(EXPR checked "${checked} + 1")

  execute_process(COMMAND "${NM}" --defined-only --extern-only --demangle "${object}"
                  OUTPUT_VARIABLE symbols ERROR_VARIABLE nm_error RESULT_VARIABLE nm_result)
  if(NOT nm_result EQUAL 0)
    message(FATAL_ERROR "${NM} failed on ${object}: ${nm_error}")
  endif()
  string(REPLACE "\n" ";" lines "${symbols}")
  set(found_table FALSE)
  foreach(line IN LISTS lines)
    if(line STREQUAL "")
      continue()
    endif()
    # "<address> <type> <name>"
    if(NOT line MATCHES "^[0-9a-fA-F]* *([A-Za-z]) (.*)$")
      list(APPEND failures "${name}: unreadable nm line '${line}'")
      continue()
    endif()
    set(type "${CMAKE_MATCH_1}")
    set(symbol "${CMAKE_MATCH_2}")
    if(symbol STREQUAL "ringmaster::kernels::${level}::table" AND type MATCHES "^[RD]$")
      set(found_table TRUE)
    else()
      list(APPEND failures "${name} (${level} flags) defines '${symbol}' (nm type ${type})")
    endif()
  endforeach()
  if(NOT found_table)
    list(APPEND failures "${name}: no constant 'ringmaster::kernels::${level}::table' defined")
  endif()

  execute_process(COMMAND "${OBJDUMP}" -h "${object}" OUTPUT_VARIABLE sections RESULT_VARIABLE od_result)
  if(NOT od_result EQUAL 0)
    message(FATAL_ERROR "${OBJDUMP} -h failed on ${object}")
  endif()
  if(sections MATCHES "\\.(init_array|preinit_array|ctors)")
    list(APPEND failures "${name} (${level} flags) runs code at start-up (.${CMAKE_MATCH_1})")
  endif()
endforeach()

if(checked EQUAL 0)
  message(FATAL_ERROR "no reduce_<level> object among: ${OBJECTS}")
endif()
if(failures)
  list(JOIN failures "\n  " text)
  message(FATAL_ERROR "instruction-set units define more than their entry points:\n  ${text}")
endif()
message(STATUS "${checked} instruction-set object files define only their level's table")
