#!/usr/bin/env bash
# Ringmaster against its peers on this machine, in one run: all_reduce of
# floats (sum), N ranks on one host (default 2), sizes 8 B .. 64 MiB, over
# one transport (default socket):
#   socket:
#     ringmaster: ringmaster-cli perf (out-of-place row), NCCL_SHM_DISABLE=1
#     gloo:       Gloo's ring all_reduce over its TCP transport
#     mpi:        Open MPI's MPI_Allreduce with --mca btl tcp,self
#     iperf3:     the loopback link itself, one stream each way (--bidir)
#   shm:
#     ringmaster: ringmaster-cli perf over shared memory (the default)
#     mpi:        Open MPI's MPI_Allreduce with --mca btl vader,self
#     memcpy:     one core copying a buffer of each size (the memory itself)
# Ringmaster's results are checked in one pass before any timed run
# (checked_pass.sh). Each tool runs `rounds` times, interleaved, and every figure is the median
# of its rounds (this machine is shared and noisy). Sizes up to 64 KiB run
# `small_iters` iterations (default 2000): 20 calls of a microsecond each
# would time one page fault or preemption, not the collective. Prints one
# table: size, busbw of each (GB/s), time at each size (us), and
# ringmaster's ratio to the best peer (the best peer's time over ours).
#   tests/bench/peers/compare.sh [build-dir] [ranks] [iters] [rounds] [socket|shm] [small_iters]
set -euo pipefail
build=${1:-build/release}
np=${2:-2}
iters=${3:-20}
rounds=${4:-3}
transport=${5:-socket}
small_iters=${6:-2000}
case "$transport" in
  socket) export NCCL_SHM_DISABLE=1 btl=tcp ;;
  shm) export NCCL_SHM_DISABLE=0 btl=vader ;;
  *) echo "compare.sh: transport must be socket or shm, not '$transport'" >&2; exit 2 ;;
esac
min=8
split=$((64 * 1024)) # the last size of the small sweep
max=$((64 * 1024 * 1024))
work=$(mktemp -d)
trap 'rm -rf "$work"; kill $(jobs -p) 2>/dev/null || true' EXIT

echo "# all_reduce float sum, $np ranks on one host over $transport, $small_iters iterations per size up to" \
  "$split B, $iters above, median of $rounds rounds"

. "$(dirname "$0")/../checked_pass.sh"
checked_pass "$build/app/ringmaster-cli" all_reduce "$np"

for ((round = 0; round < rounds; round++)); do
  # Two sweeps per tool: the small sizes with many iterations, then the rest.
  for sweep in small large; do
    if [[ $sweep == small ]]; then lo=$min hi=$split n=$small_iters; else lo=$((split * 2)) hi=$max n=$iters; fi
    # -z 1: each call waited for before the next, as MPI_Allreduce and Gloo
    # do. --warmup-ms: on this VM a rank's first tens of milliseconds of
    # collectives after init run several times slower whatever the count
    # (the peers' own init ends in busy waiting), so the first size warms
    # up for 200 ms.
    "$build/app/ringmaster-cli" perf all_reduce -a 0 --np "$np" -b $lo -e $hi -f 2 -n "$n" -w 3 --warmup-ms 200 -z 1 -c 0 \
      --no-stages \
      --json-file "$work/ringmaster.$round.$sweep.json" >/dev/null

    if [[ $transport == socket ]]; then
      rm -rf "$work/gloo-store" && mkdir -p "$work/gloo-store"
      for ((r = 0; r < np; r++)); do
        "$build/tests/bench/peers/gloo_allreduce" $r "$np" "$work/gloo-store" $lo $hi "$n" >"$work/gloo.$round.$sweep.$r" &
      done
      wait
      mv "$work/gloo.$round.$sweep.0" "$work/gloo.$round.$sweep"
    else
      "$build/tests/bench/peers/memcpy_bench" $lo $hi "$n" >"$work/gloo.$round.$sweep"
    fi

    mpirun --allow-run-as-root --oversubscribe -np "$np" --mca btl $btl,self --mca btl_tcp_if_include lo \
      --mca pml ob1 "$build/tests/bench/peers/mpi_allreduce" $lo $hi "$n" >"$work/mpi.$round.$sweep" 2>"$work/mpi.err" ||
      { cat "$work/mpi.err" >&2; exit 1; }
  done
  cat "$work/gloo.$round.small" "$work/gloo.$round.large" >"$work/gloo.$round.0"
  cat "$work/mpi.$round.small" "$work/mpi.$round.large" >"$work/mpi.$round"
  python3 -c 'import json,sys; print(json.dumps(json.load(open(sys.argv[1])) + json.load(open(sys.argv[2]))))' \
    "$work/ringmaster.$round.small.json" "$work/ringmaster.$round.large.json" >"$work/ringmaster.$round.json"
done

iperf_gbps=""
if [[ $transport == socket ]] && command -v iperf3 >/dev/null; then
  iperf3 -s -1 -p 5299 >/dev/null 2>&1 &
  sleep 0.5
  iperf_gbps=$(iperf3 -c 127.0.0.1 -p 5299 -t 3 --bidir -J 2>/dev/null |
    python3 -c 'import json,sys; d=json.load(sys.stdin)["end"]; print("%.2f" % (d["sum_sent"]["bits_per_second"]/8e9))' || true)
fi

python3 - "$work" "$iperf_gbps" "$rounds" "$transport" <<'PY'
import json, statistics, sys
work, iperf, rounds, transport = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
def median_table(rows_per_round):
    sizes = set.intersection(*(set(r) for r in rows_per_round))
    return {s: (statistics.median(r[s][0] for r in rows_per_round), statistics.median(r[s][1] for r in rows_per_round))
            for s in sizes}
def text_rows(path):
    rows = {}
    for line in open(path):
        b, t, bw = line.split()
        rows[int(b)] = (float(t), float(bw))
    return rows
def rm_rows(path):
    return {r["bytes"]: (r["out_of_place"]["time_us"], r["out_of_place"]["busbw"]) for r in json.load(open(path))}
rm = median_table([rm_rows(f"{work}/ringmaster.{i}.json") for i in range(rounds)])
gloo = median_table([text_rows(f"{work}/gloo.{i}.0") for i in range(rounds)])
mpi = median_table([text_rows(f"{work}/mpi.{i}") for i in range(rounds)])
# Over shm the second column is memcpy: the memory's own pace, not a peer.
second, third = ("gloo", "mpi-tcp") if transport == "socket" else ("memcpy", "mpi-vader")
print(f"{'size(B)':>10} {'ringmaster':>11} {second:>9} {third:>9}   {'rm us':>9} {second + ' us':>10} {'mpi us':>9}   {'ratio to best peer':>18}")
for size in sorted(rm):
    r = rm[size]; g = gloo.get(size, (float('nan'), 0.0)); m = mpi.get(size, (float('nan'), 0.0))
    # From the times: the peers print busbw to three decimals, which at
    # small sizes is all rounding (0.001 GB/s).
    peers = [t for t in ((g[0], m[0]) if transport == "socket" else (m[0],)) if t == t and t > 0]
    ratio = min(peers) / r[0] if peers and r[0] > 0 else float('nan')
    print(f"{size:>10} {r[1]:>11.3f} {g[1]:>9.3f} {m[1]:>9.3f}   {r[0]:>9.1f} {g[0]:>10.1f} {m[0]:>9.1f}   {ratio:>18.2f}")
if iperf:
    print(f"# loopback link (iperf3 --bidir, one stream each way): {iperf} GB/s per direction")
PY
