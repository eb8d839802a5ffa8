#!/usr/bin/env bash
# The prepared check for a GPU machine (docs/gpu.md): run from the
# repository root with the bundle tests/device/bundle.sh made
# (.device-bundle); writes check.log (every step's output) and gpus.json
# (the NVML inventory) under $OUT (default ./device-out). Every step has its own time limit; the whole
# run stays under 5 minutes on one H200.
#
# Steps: the GPU as nvidia-smi sees it; the CUDA sources compiled there
# (sm_90) and the carried binaries' machine code listed; the kernels
# against the CPU reference for every dtype x op; collectives on device
# buffers (staged, and read on the GPU from the peers, threads and
# processes); reduce bandwidth against a device-to-device copy; staged
# all_reduce of device buffers against host buffers, and on the GPU; the NVML inventory
# and the software stack; the same sweep through NCCL on every GPU here
# (ringmaster-nccl-perf, with NCCL's decisions read from its INFO lines;
# nccl.json), NCCL from the system or from the Python environment's wheel;
# a running NCCL rank watched from outside through its RAS port and log.
set -uo pipefail
cd "$(dirname "$0")/../.."
bundle=${BUNDLE:-.device-bundle}
if ! bundle=$(cd "$bundle" 2>/dev/null && pwd); then
  echo "check.sh: no bundle at ${BUNDLE:-.device-bundle}: make one with tests/device/bundle.sh" >&2
  exit 2
fi
out=${OUT:-device-out}
mkdir -p "$out"
log="$out/check.log"
: >"$log"
steps=$(mktemp -d)
failures=0

say() { echo "$*" | tee -a "$log"; }

# Our programs with the bundle's libraries; with the bundle's glibc too
# when the system's is older than the one they were built against.
export LD_LIBRARY_PATH="$bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
loader=()
if ! "$bundle/bin/ringmaster-cli" --version >/dev/null 2>&1; then
  loader=("$bundle/glibc/ld-linux-x86-64.so.2" --library-path "$bundle/lib:$bundle/glibc:/usr/local/nvidia/lib64:/usr/lib/x86_64-linux-gnu")
  say "# the system's C library is older than the build's: running through the bundled loader"
fi

# step NAME LIMIT_S COMMAND...: runs it, its output into the log. SKIP
# (space-separated step names) leaves steps out, e.g. a second run's.
step() {
  local name=$1 limit=$2
  shift 2
  if [[ " ${SKIP:-} " == *" $name "* ]]; then
    say "== $name: left out (SKIP)"
    return 0
  fi
  say "== $name"
  local start=$SECONDS
  timeout "$limit" "$@" >"$steps/$name.txt" 2>&1
  local rc=$?
  cat "$steps/$name.txt" >>"$log"
  say "-- $name: exit $rc in $((SECONDS - start)) s"
  # 77: a test binary whose tests skipped, none failing (tests/support/gtest_main.cpp).
  if (( rc != 0 && rc != 77 )); then failures=$((failures + 1)); fi
  return 0
}
# One of the bundle's programs, through the bundled loader when needed.
run=(${loader[@]+"${loader[@]}"})

say "# $(date -u +%FT%TZ) $(uname -r)"
step gpu 20 nvidia-smi --query-gpu=name,driver_version,memory.total,pcie.link.gen.current,pcie.link.width.current,clocks.sm,clocks.max.sm --format=csv
if command -v nvcc >/dev/null; then
  # cuobjdump sits beside nvcc.
  tools=$(dirname "$(command -v nvcc)")
  step build 120 bash -c "nvcc --version | tail -2 && nvcc -std=c++20 -O3 -gencode arch=compute_90,code=sm_90 -Iengine/include -Iengine/src -I$bundle/include -c engine/src/gpu/cuda_module.cu -o /tmp/cuda_module.o && $tools/cuobjdump --list-elf /tmp/cuda_module.o | head -3 && echo carried: && $tools/cuobjdump --list-elf --list-ptx $bundle/bin/kernels_test | sort | uniq -c | head"
else
  say "== build: skipped, no nvcc on this machine"
fi
step kernels 150 ${run[@]+"${run[@]}"} "$bundle/bin/kernels_test" --gtest_filter='Gpu*'
step collectives 120 ${run[@]+"${run[@]}"} "$bundle/bin/gpu_collectives_test"
step reduce_bandwidth 60 ${run[@]+"${run[@]}"} "$bundle/bin/gpu_reduce_bench" --bytes 268435456 --iters 50
step staged_all_reduce 120 ${run[@]+"${run[@]}"} "$bundle/bin/gpu_allreduce_bench" --ranks 2 --iters 30 --sizes 16777216,67108864,268435456
# The pipeline's chunk: smaller keeps chunks in cache, larger costs fewer calls.
for chunk in 2097152 16777216; do
  step "staged_all_reduce_chunk_$chunk" 60 env RINGMASTER_CUDA_STAGE_CHUNK=$chunk ${run[@]+"${run[@]}"} \
    "$bundle/bin/gpu_allreduce_bench" --ranks 2 --iters 30 --sizes 16777216,67108864,268435456
done
# all_reduce read on the GPU from the peers (RINGMASTER_CUDA_IPC=1; ranks as
# threads here, between processes in gpu_collectives_test) against host buffers.
step gpu_all_reduce_ipc 60 env RINGMASTER_CUDA_IPC=1 NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=COLL ${run[@]+"${run[@]}"} \
  "$bundle/bin/gpu_allreduce_bench" --ranks 2 --iters 30 --sizes 16777216,67108864,268435456
# Where a staged call's time goes (first chunk on the host, last reduced, done).
step staged_phases 60 env NCCL_DEBUG=TRACE NCCL_DEBUG_SUBSYS=COLL ${run[@]+"${run[@]}"} \
  "$bundle/bin/gpu_allreduce_bench" --ranks 2 --iters 5 --sizes 16777216,268435456
step inventory 30 ${run[@]+"${run[@]}"} "$bundle/bin/ringmaster-cli" gpus
step inventory_json 30 ${run[@]+"${run[@]}"} "$bundle/bin/ringmaster-cli" gpus --json
[[ -f "$steps/inventory_json.txt" ]] && cp "$steps/inventory_json.txt" "$out/gpus.json"
# On a machine with a GPU, a GPU test that skipped is a failure.
if nvidia-smi -L >/dev/null 2>&1; then
  for name in kernels collectives; do
    if [[ -f "$steps/$name.txt" ]] && grep -q 'SKIPPED \] [1-9]' "$steps/$name.txt"; then
      say "!! $name: skipped although nvidia-smi sees a GPU"
      failures=$((failures + 1))
    fi
  done
fi
# NCCL: the system's, else the one a PyTorch wheel carries.
nccl=$(ldconfig -p 2>/dev/null | awk '/libnccl\.so\.2 /{print $NF; exit}')
if [[ -z "$nccl" ]]; then
  nccl=$(python3 -c 'import os, nvidia.nccl as n; print(os.path.join(list(n.__path__)[0], "lib", "libnccl.so.2"))' \
    2>/dev/null || true)
fi
if [[ -n "$nccl" && -f "$nccl" ]]; then
  step nccl 120 env RINGMASTER_NCCL_LIBRARY="$nccl" ${run[@]+"${run[@]}"} "$bundle/bin/ringmaster-nccl-perf" \
    all_reduce -b 8 -e 256M -f 4 -n 20 --json "$out/nccl.json"
  if [[ -f "$steps/nccl.txt" ]] && grep -q '^not run' "$steps/nccl.txt" && nvidia-smi -L >/dev/null 2>&1; then
    say "!! nccl: not run although nvidia-smi sees a GPU"
    failures=$((failures + 1))
  fi
  # A job watched from outside (docs/watch.md): one NCCL rank with RAS on a
  # port of its own and its INFO lines in a file, read by `watch --nccl-ras
  # --nccl-log` while it runs: NCCL's own RAS answers and its own log reads.
  step nccl_watch 60 bash -c 'env RINGMASTER_NCCL_LIBRARY="$1" RANK=0 WORLD_SIZE=1 LOCAL_RANK=0 \
      MASTER_ADDR=127.0.0.1 MASTER_PORT=29517 NCCL_RAS_ADDR=127.0.0.1:28123 NCCL_DEBUG=INFO \
      NCCL_DEBUG_FILE=/tmp/rm-watch-nccl.%h.%p.log "${@:3}" "$2/ringmaster-nccl-perf" all_reduce -b 1M -e 1M \
      -n 1000000 >/dev/null 2>&1 &
    pid=$!; sleep 10
    "${@:3}" "$2/ringmaster-cli" watch --pid "$pid" --nccl-ras --nccl-log; kill "$pid"; wait "$pid" || true' \
    _ "$nccl" "$bundle/bin" ${run[@]+"${run[@]}"}
  if nvidia-smi -L >/dev/null 2>&1 && ! grep -q 'NCCL RAS at 127.0.0.1:28123: \(every\|communicator\)' \
    "$steps/nccl_watch.txt" 2>/dev/null; then
    say "!! nccl_watch: NCCL's RAS port did not answer the watch"
    failures=$((failures + 1))
  fi
else
  say "== nccl: not run: no libnccl.so.2 (ldconfig, or a Python environment's nvidia.nccl)"
fi
say "# $(date -u +%FT%TZ) done, $failures step(s) failed"
exit $(( failures > 0 ))
