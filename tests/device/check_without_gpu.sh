#!/usr/bin/env bash
# tests/device/check.sh on a machine without a GPU, as ctest runs it on
# builds with CUDA (device_check_test): the bundle a GPU machine is sent
# must be whole and under 64 MiB, and every step must run to its end and
# say why it measured nothing, so that a lent GPU's few minutes are not
# lost to a script that no longer works.
#
#   tests/device/check_without_gpu.sh BUILD_DIR
set -uo pipefail
build=$(cd "$1" && pwd)
cd "$(dirname "$0")/../.."
if nvidia-smi -L >/dev/null 2>&1; then
  echo "SKIPPED: nvidia-smi sees a GPU here: run tests/device/check.sh itself"
  exit 0
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() {
  echo "FAIL: $*"
  [[ -f "$work/out/check.log" ]] && grep -E '^(==|--|!!|#)' "$work/out/check.log"
  exit 1
}

tests/device/bundle.sh "$build" "$work/bundle" || fail "bundle.sh did not make the bundle"
# The chunk variants and the phases repeat the staged step: left out here.
BUNDLE="$work/bundle" OUT="$work/out" \
  SKIP="staged_all_reduce_chunk_2097152 staged_all_reduce_chunk_16777216 gpu_all_reduce_ipc staged_phases" \
  bash tests/device/check.sh >"$work/stdout" 2>&1
log="$work/out/check.log"
[[ -s "$log" ]] || fail "check.sh wrote no check.log: $(cat "$work/stdout")"
tail -1 "$log" | grep -q 'done, ' || fail "check.sh did not reach its end"

# Every step ran; the only one that may fail here is nvidia-smi's. The GPU
# tests end with 77 (their tests skipped, none failed), the rest with 0.
failed=$(grep -E '^-- [a-z_0-9]+: exit [1-9]' "$log" | grep -v -e '^-- gpu: ' -e '^-- kernels: exit 77 ' \
  -e '^-- collectives: exit 77 ' || true)
[[ -z "$failed" ]] || fail "steps failed without a GPU: $failed"
for name in kernels collectives; do
  grep -q "^-- $name: exit 77 " "$log" || fail "step $name did not end as skipped (exit 77)"
done
for name in reduce_bandwidth staged_all_reduce inventory inventory_json; do
  grep -q "^-- $name: exit 0" "$log" || fail "step $name did not run"
done
# Each says why it measured nothing.
reason=$(sed -n 's/.*CUDA in this build: built, not usable: //p' "$log" | head -1)
[[ -n "$reason" ]] || fail "ringmaster-cli gpus did not say why CUDA is not usable"
grep -q "no CUDA device: $reason" "$log" || fail "the GPU tests did not skip naming why ($reason)"
grep -q "device buffers not measured: $reason" "$log" || fail "gpu_allreduce_bench did not say why"
grep -q "nothing measured" "$log" || fail "gpu_reduce_bench did not say why"
[[ -s "$work/out/gpus.json" ]] || fail "no gpus.json"
echo "check.sh ran every step without a GPU, each saying why: $reason"
