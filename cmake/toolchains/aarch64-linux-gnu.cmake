# Cross-compiles for AArch64 Linux (NVIDIA Grace: GH200, GB200) with
# Debian's g++-aarch64-linux-gnu. Libraries come from Debian's arm64
# packages installed beside the host's through multiarch (dpkg
# --add-architecture arm64; scripts/setup-deps does it), so no sysroot:
# headers are shared under /usr/include, libraries live in
# /usr/lib/aarch64-linux-gnu.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_LIBRARY_ARCHITECTURE aarch64-linux-gnu)

set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)

# Programs (pkg-config, nm) are the build machine's; pkg-config reads the
# arm64 .pc files only.
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(ENV{PKG_CONFIG_LIBDIR} "/usr/lib/aarch64-linux-gnu/pkgconfig:/usr/share/pkgconfig")

# Test executables run under user-mode emulation (Debian's qemu-user).
find_program(RINGMASTER_QEMU_AARCH64 qemu-aarch64)
if(RINGMASTER_QEMU_AARCH64)
  set(CMAKE_CROSSCOMPILING_EMULATOR ${RINGMASTER_QEMU_AARCH64})
endif()
