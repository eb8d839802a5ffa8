#!/usr/bin/env bash
# Ringmaster's libfabric transport against libfabric's own benchmark, in one
# run, 2 ranks on loopback over the same provider (default tcp, which
# libfabric serves as tcp;ofi_rxm for RDM endpoints):
#   ringmaster sendrecv: ringmaster-cli perf sendrecv --np 2 with NCCL_NET=OFI
#                        (each rank sends one buffer and receives one)
#   ringmaster all_reduce: the same for all_reduce (busbw)
#   fi_pingpong:         fi_pingpong -e rdm, its MB/sec (bytes both ways over
#                        the whole ping-pong), at least 256 MiB per size
# Sizes 1 MiB .. 64 MiB. Ringmaster's results are checked in one pass
# before any timed run (checked_pass.sh). Each tool runs `rounds` times, interleaved; every
# figure is the median of its rounds. Prints one table in GB/s and the
# ratio of ringmaster's sendrecv to fi_pingpong.
#   tests/bench/peers/ofi_compare.sh [build-dir] [iters] [rounds] [provider]
set -euo pipefail
build=${1:-build/release}
iters=${2:-20}
rounds=${3:-3}
provider=${4:-tcp}
min=$((1024 * 1024))
max=$((64 * 1024 * 1024))
command -v fi_pingpong >/dev/null || { echo "ofi_compare.sh: fi_pingpong not found (Debian package libfabric-bin)" >&2; exit 2; }
work=$(mktemp -d)
trap 'rm -rf "$work"; kill $(jobs -p) 2>/dev/null || true' EXIT
export NCCL_NET=OFI NCCL_SHM_DISABLE=1 FI_PROVIDER=$provider

echo "# 2 ranks on loopback over libfabric ($provider, RDM endpoints), $iters iterations per size, median of $rounds rounds"

. "$(dirname "$0")/../checked_pass.sh"
for collective in sendrecv all_reduce; do
  checked_pass "$build/app/ringmaster-cli" $collective 2
done

port=47600
for ((round = 0; round < rounds; round++)); do
  for collective in sendrecv all_reduce; do
    "$build/app/ringmaster-cli" perf $collective -a 0 --np 2 -b $min -e $max -f 2 -n "$iters" -w 3 -c 0 --no-stages \
      --json-file "$work/$collective.$round.json" >/dev/null
  done
  for ((size = min; size <= max; size *= 2)); do
    port=$((port + 1))
    # At least 256 MiB each way: its clock starts with the first transfer.
    n=$((256 * 1024 * 1024 / size))
    ((n < iters)) && n=$iters
    fi_pingpong -p "$provider" -e rdm -S $size -I $n -B $port >/dev/null 2>&1 &
    server=$!
    sleep 0.3
    fi_pingpong -p "$provider" -e rdm -S $size -I $n -P $port 127.0.0.1 2>/dev/null |
      awk -v size=$size 'f { print size, $6; exit } /MB\/sec/ { f = 1 }' >>"$work/pingpong.$round"
    wait $server || true
  done
done

python3 - "$work" "$rounds" <<'PY'
import json, statistics, sys
work, rounds = sys.argv[1], int(sys.argv[2])
def median(tables):
    sizes = set.intersection(*(set(t) for t in tables))
    return {s: statistics.median(t[s] for t in tables) for s in sizes}
def rm(path):
    return {r["bytes"]: r["out_of_place"]["busbw"] for r in json.load(open(path))}
def pingpong(path):
    return {int(s): float(mb) / 1000 for s, mb in (line.split() for line in open(path))}
sendrecv = median([rm(f"{work}/sendrecv.{i}.json") for i in range(rounds)])
allreduce = median([rm(f"{work}/all_reduce.{i}.json") for i in range(rounds)])
pp = median([pingpong(f"{work}/pingpong.{i}") for i in range(rounds)])
print(f"{'size(B)':>10} {'sendrecv':>9} {'all_reduce':>10} {'fi_pingpong':>11}   {'sendrecv/fi_pingpong':>20}")
for size in sorted(sendrecv):
    p = pp.get(size, float("nan"))
    print(f"{size:>10} {sendrecv[size]:>9.3f} {allreduce.get(size, float('nan')):>10.3f} {p:>11.3f}   {sendrecv[size] / p:>20.2f}")
PY
