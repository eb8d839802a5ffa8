#!/usr/bin/env bash
# Packs what tests/device/check.sh runs on a GPU machine that has none of
# our Debian libraries: the CUDA-enabled test programs, ringmaster-cli and
# ringmaster-nccl-perf from a build made here, the shared libraries they need beyond glibc and
# libstdc++, the CUDA module (libringmaster_cuda.so, the CUDA runtime
# linked into it statically), and this machine's glibc as a fallback
# loader for an older system there. The driver (libcuda.so.1,
# libnvidia-ml.so.1) is the GPU machine's own.
#
#   tests/device/bundle.sh [BUILD_DIR] [BUNDLE_DIR]     (build/cuda, .device-bundle)
#
# BUILD_DIR must be configured with RINGMASTER_CUDA=ON; the bundle stays
# under 64 MiB (checked).
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build/cuda}
bundle=${2:-.device-bundle}

if ! grep -q '^RINGMASTER_CUDA_ENABLED:INTERNAL=TRUE' "$build/CMakeCache.txt" 2>/dev/null; then
  echo "bundle.sh: $build is not a build with CUDA; configure one with:" >&2
  echo "  cmake -S . -B $build -G Ninja -DCMAKE_BUILD_TYPE=Release -DRINGMASTER_CUDA=ON -DRINGMASTER_UI=OFF" >&2
  exit 2
fi
programs=(tests/unit/kernels_test tests/unit/gpus_test tests/integration/gpu_collectives_test
          tests/bench/gpu_reduce_bench tests/bench/gpu_allreduce_bench app/ringmaster-cli app/ringmaster-nccl-perf)
cmake --build "$build" --target kernels_test gpus_test nvml_double gpu_collectives_test gpu_reduce_bench \
  gpu_allreduce_bench ringmaster-cli ringmaster-nccl-perf

rm -rf "$bundle"
mkdir -p "$bundle/bin" "$bundle/lib" "$bundle/glibc"
for p in "${programs[@]}"; do
  cp "$build/$p" "$bundle/bin/"
done
cp "$build/tests/unit/libnvml_double.so" "$build/engine/libringmaster_cuda.so" "$bundle/lib/"
# Every library the programs load, except the C library's own parts
# (those go to glibc/, used only when the system's are older).
for p in "${programs[@]}"; do
  ldd "$build/$p" | awk '/=> \//{print $3} /^\t\/lib64/{print $1}'
done | sort -u | while read -r lib; do
  case "$(basename "$lib")" in
    libc.so.*|libm.so.*|ld-linux-*|libpthread.so.*|libdl.so.*|librt.so.*|libstdc++.so.*|libgcc_s.so.*)
      cp -L "$lib" "$bundle/glibc/" ;;
    *) cp -L "$lib" "$bundle/lib/" ;;
  esac
done
# The version header the kernels' sources include, for the compile check there.
mkdir -p "$bundle/include/ringmaster"
cp "$build/engine/include/ringmaster/version.h" "$bundle/include/ringmaster/"
size=$(du -sm "$bundle" | cut -f1)
echo "bundle.sh: $bundle holds $(ls "$bundle/bin" | wc -l) programs and $(ls "$bundle/lib" "$bundle/glibc" | grep -c '\.so') libraries, ${size} MiB"
if (( size >= 64 )); then
  echo "bundle.sh: over the 64 MiB a GPU machine is sent" >&2
  exit 1
fi
