# Optional features: RINGMASTER_CUDA, RINGMASTER_OFI, RINGMASTER_UI, each
# AUTO (on when found), ON (required: configure fails without it) or OFF.
# Each detection records one line for the summary printed at the end of
# configure, saying what was enabled and, if not, why.

function(ringmaster_feature_option name doc)
  set(${name} AUTO CACHE STRING "${doc} (AUTO|ON|OFF)")
  set_property(CACHE ${name} PROPERTY STRINGS AUTO ON OFF)
  string(TOUPPER "${${name}}" value)
  if(NOT value MATCHES "^(AUTO|ON|OFF)$")
    message(FATAL_ERROR "${name}=${${name}}: expected AUTO, ON or OFF")
  endif()
  set(${name} ${value} PARENT_SCOPE)
endfunction()

# ringmaster_feature_result(NAME ENABLED REASON): records the outcome and
# fails configure when the feature was required but is not available.
function(ringmaster_feature_result name enabled reason)
  if(${name} STREQUAL "ON" AND NOT enabled)
    message(FATAL_ERROR "${name}=ON but ${reason}")
  endif()
  if(enabled)
    set(line "  ${name}: enabled (${reason})")
  elseif(${name} STREQUAL "OFF")
    set(line "  ${name}: disabled (${name}=OFF)")
  else()
    set(line "  ${name}: disabled (${reason})")
  endif()
  set_property(GLOBAL APPEND_STRING PROPERTY RINGMASTER_FEATURE_LINES "${line}\n")
  set(${name}_ENABLED ${enabled} CACHE INTERNAL "")
endfunction()

function(ringmaster_feature_summary)
  get_property(lines GLOBAL PROPERTY RINGMASTER_FEATURE_LINES)
  message(STATUS "Ringmaster ${PROJECT_VERSION} features:\n${lines}")
endfunction()

ringmaster_feature_option(RINGMASTER_CUDA "CUDA kernels and transports")
ringmaster_feature_option(RINGMASTER_OFI "libfabric transport")
ringmaster_feature_option(RINGMASTER_UI "Qt 6 console")

# CUDA
if(RINGMASTER_CUDA STREQUAL "OFF")
  ringmaster_feature_result(RINGMASTER_CUDA FALSE "")
else()
  find_package(CUDAToolkit QUIET)
  if(CUDAToolkit_FOUND)
    # The kernels are built for Ampere (sm_80) and Hopper (sm_90) with PTX
    # for later GPUs, which the driver compiles at load; the runtime is
    # linked statically and opens the driver itself, so the binaries run
    # (with CUDA reported unusable) where no driver is installed.
    if(NOT DEFINED CMAKE_CUDA_COMPILER)
      set(CMAKE_CUDA_COMPILER ${CUDAToolkit_NVCC_EXECUTABLE})
    endif()
    if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
      set(CMAKE_CUDA_ARCHITECTURES 80-real 90-real 90-virtual)
    endif()
    include(CheckLanguage)
    check_language(CUDA)
    if(CMAKE_CUDA_COMPILER)
      enable_language(CUDA)
      # CMake 3.25 does not know nvcc's C++20 flag; it is told here.
      set(CMAKE_CUDA20_STANDARD_COMPILE_OPTION "-std=c++20")
      set(CMAKE_CUDA20_EXTENSION_COMPILE_OPTION "-std=c++20")
      set(CMAKE_CUDA_STANDARD 20)
      set(CMAKE_CUDA_STANDARD_REQUIRED ON)
      ringmaster_feature_result(RINGMASTER_CUDA TRUE
                                "toolkit ${CUDAToolkit_VERSION}, kernels for ${CMAKE_CUDA_ARCHITECTURES}")
    else()
      ringmaster_feature_result(RINGMASTER_CUDA FALSE
                                "toolkit ${CUDAToolkit_VERSION} found, but nvcc cannot compile with this host compiler")
    endif()
  else()
    ringmaster_feature_result(RINGMASTER_CUDA FALSE "no CUDA toolkit found (nvcc on PATH or in /usr/local/cuda)")
  endif()
endif()

# libfabric
if(RINGMASTER_OFI STREQUAL "OFF")
  ringmaster_feature_result(RINGMASTER_OFI FALSE "")
else()
  find_package(PkgConfig QUIET)
  if(PkgConfig_FOUND)
    pkg_check_modules(LIBFABRIC QUIET IMPORTED_TARGET libfabric)
  endif()
  if(LIBFABRIC_FOUND)
    ringmaster_feature_result(RINGMASTER_OFI TRUE "libfabric ${LIBFABRIC_VERSION}")
  else()
    ringmaster_feature_result(RINGMASTER_OFI FALSE "libfabric not found (Debian package libfabric-dev)")
  endif()
endif()

# Qt console
if(RINGMASTER_UI STREQUAL "OFF")
  ringmaster_feature_result(RINGMASTER_UI FALSE "")
else()
  find_package(Qt6 QUIET COMPONENTS Widgets Charts Sql Test)
  if(Qt6_FOUND)
    ringmaster_feature_result(RINGMASTER_UI TRUE "Qt ${Qt6_VERSION}")
  else()
    ringmaster_feature_result(RINGMASTER_UI FALSE "Qt 6 Widgets/Charts/Sql/Test not found (qt6-base-dev, qt6-charts-dev)")
  endif()
endif()

# Portability: the x86-64 build's tests under emulated CPUs without AVX-512
# and without AVX, and an AArch64 cross build tested under emulation
# (tests/portability). Needs Debian's qemu-user and g++-aarch64-linux-gnu
# with the arm64 libraries (scripts/setup-deps installs them).
ringmaster_feature_option(RINGMASTER_PORTABILITY "emulated-CPU tests and the AArch64 cross build")
if(RINGMASTER_PORTABILITY STREQUAL "OFF")
  ringmaster_feature_result(RINGMASTER_PORTABILITY FALSE "")
elseif(NOT CMAKE_SYSTEM_PROCESSOR MATCHES "x86_64|AMD64" OR CMAKE_CROSSCOMPILING)
  ringmaster_feature_result(RINGMASTER_PORTABILITY FALSE "runs from an x86-64 build machine only")
else()
  find_program(RINGMASTER_QEMU_X86_64 qemu-x86_64)
  find_program(RINGMASTER_QEMU_AARCH64 qemu-aarch64)
  find_program(RINGMASTER_AARCH64_CXX aarch64-linux-gnu-g++)
  set(_missing "")
  foreach(tool RINGMASTER_QEMU_X86_64 RINGMASTER_QEMU_AARCH64 RINGMASTER_AARCH64_CXX)
    if(NOT ${tool})
      string(REGEX REPLACE "^RINGMASTER_" "" _name "${tool}")
      list(APPEND _missing "${_name}")
    endif()
  endforeach()
  if(_missing)
    list(JOIN _missing ", " _missing)
    ringmaster_feature_result(RINGMASTER_PORTABILITY FALSE
                              "not found: ${_missing} (Debian packages qemu-user, g++-aarch64-linux-gnu)")
  else()
    ringmaster_feature_result(RINGMASTER_PORTABILITY TRUE "${RINGMASTER_QEMU_X86_64}, ${RINGMASTER_AARCH64_CXX}")
  endif()
endif()
