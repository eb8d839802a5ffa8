#!/usr/bin/env bash
# The tuner against measurement: all_reduce of floats on N local ranks (over
# shared memory; NCCL_SHM_DISABLE=1 for loopback sockets), every candidate
# forced in turn (ring/tree x LL/LL128/Simple over shared memory, LL/Simple
# over sockets) and the tuner left to pick, sizes 8 B .. 64 MiB. One
# `perf --candidates` run times them all size by size, one after the
# other, so the best candidate and the pick meet the same minute of the
# machine. Each run's first size is warmed up for 100 ms; sizes up to
# 64 KiB take SMALL_ITERS calls (200), larger ones ITERS (10), so a small
# size is not timed within one scheduling hiccup. Each call is
# waited for before the next (-z 1): the model predicts one collective's
# time, as a training loop calls it, not the pace of a queued batch.
# Each rank count runs `rounds` times (a new communicator each); times and
# predictions are medians. Each run calibrates its own links
# (RINGMASTER_TUNE_CACHE=off unless set), as a communicator does without a
# cache: on a machine whose
# pace drifts by the minute, an hour-old calibration says more about that
# hour than about the model.
# Before timing, a pass with every element checked (checked_pass.sh).
# Prints per size: each candidate's time, the tuner's pick, the automatic
# run's time (the tuner choosing, as a program runs) over the best forced
# candidate's, and the pick's predicted time (the median of every round's
# prediction for it) over its measured one; then how many
# sizes are within 15% of the best and within 30% of the prediction; then
# every candidate's predicted over measured time.
#   tests/bench/tuner_bench.sh [build-dir] [ranks...]   (default: 4 8)
set -euo pipefail
build=${1:-build/release}
shift || true
ranks=("$@")
[ ${#ranks[@]} -gt 0 ] || ranks=(4 8)
iters=${ITERS:-10}
small_iters=${SMALL_ITERS:-200}
rounds=${ROUNDS:-2}
export RINGMASTER_TUNE_CACHE=${RINGMASTER_TUNE_CACHE:-off}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
if [ "${NCCL_SHM_DISABLE:-0}" = 1 ]; then
  link=sockets
  candidates=(Ring/LL Ring/Simple Tree/LL Tree/Simple)
else
  link=shm
  candidates=(Ring/LL Ring/LL128 Ring/Simple Tree/LL Tree/LL128 Tree/Simple)
fi

list=$(IFS=,; echo "${candidates[*]},auto")
. "$(dirname "$0")/checked_pass.sh"
for np in "${ranks[@]}"; do
  checked_pass "$build/app/ringmaster-cli" all_reduce "$np" --candidates "$list"
done
for np in "${ranks[@]}"; do
  for ((round = 0; round < rounds; round++)); do
    name="$work/$np.$round"
    "$build/app/ringmaster-cli" perf all_reduce -a 0 --np "$np" -b 8 -e 64K -f 2 -n "$small_iters" -w 20 --warmup-ms 100 \
      -z 1 -c 0 --no-stages --candidates "$list" --json-file "$name.small.json" >/dev/null
    "$build/app/ringmaster-cli" perf all_reduce -a 0 --np "$np" -b 128K -e 64M -f 2 -n "$iters" -w 2 --warmup-ms 100 \
      -z 1 -c 0 --no-stages --candidates "$list" --json-file "$name.large.json" >/dev/null
    python3 -c 'import json, sys; json.dump(json.load(open(sys.argv[1])) + json.load(open(sys.argv[2])), open(sys.argv[3], "w"))' \
      "$name.small.json" "$name.large.json" "$name.json"
  done
done

python3 - "$work" "$rounds" "$link" "${candidates[*]}" "${ranks[@]}" <<'PY'
import json, statistics, sys
work, rounds, link, cands, ranks = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4].split(), sys.argv[5:]
def load(np, name):
    runs = [[r for r in json.load(open(f"{work}/{np}.{i}.json")) if r["candidate"] == name] for i in range(rounds)]
    out = {}
    for size in {r["bytes"] for r in runs[0]}:
        rows = [next(r for r in run if r["bytes"] == size) for run in runs]
        # Each round calibrated anew: its prediction is the median of the
        # rounds' too, and the pick the one most rounds made.
        recs = [r["tuner"] for r in rows if r.get("tuner")]
        rec = None
        if recs:
            names = [(t["algorithm"], t["protocol"]) for t in recs]
            common = max(set(names), key=names.count)
            rec = dict(next(t for t in recs if (t["algorithm"], t["protocol"]) == common))
            rec["predicted_us"] = statistics.median(
                t["predicted_us"] for t in recs if (t["algorithm"], t["protocol"]) == common)
        out[size] = (statistics.median(r["out_of_place"]["time_us"] for r in rows), rec)
    return out
for np in ranks:
    measured = {c: load(np, c) for c in cands}
    auto = load(np, "auto")
    where = "over shared memory" if link == "shm" else "on loopback sockets"
    print(f"\n# all_reduce float sum, {np} ranks {where}; times in us (median of {rounds} rounds)")
    print(f"{'size(B)':>10} " + " ".join(f"{c:>12}" for c in cands) +
          f" {'pick':>12} {'auto/best':>9} {'predicted':>10} {'pred/meas':>9} {'auto run':>9}")
    within_best = within_pred = total = 0
    for size in sorted(auto):
        times = {c: measured[c][size][0] for c in cands if size in measured[c]}
        best = min(times.values())
        pick = auto[size][1]
        name = f"{pick['algorithm']}/{pick['protocol']}"
        t_pick = times[name]
        # What a program gets: the automatic run's own time, not the
        # forced run of the candidate it picked.
        ratio = auto[size][0] / best
        # Every round's tuner predicts the picked candidate (its forced
        # row carries that figure); the auto rows only of the rounds that
        # picked it, and a median of two rounds is their mean, one bad
        # calibration's half.
        forced = measured[name].get(size, (None, None))[1]
        predicted = forced["predicted_us"] if forced else pick["predicted_us"]
        pred = predicted / t_pick
        total += 1
        within_best += ratio <= 1.15
        within_pred += 0.7 <= pred <= 1.3
        print(f"{size:>10} " + " ".join(f"{times[c]:>12.1f}" for c in cands) +
              f" {name:>12} {ratio:>9.2f} {predicted:>10.1f} {pred:>9.2f} {auto[size][0]:>9.1f}")
    print(f"# {np} ranks: automatic run within 15% of the best at {within_best}/{total} sizes "
          f"({100 * within_best / total:.0f}%); predicted within 30% of measured at {within_pred}/{total} "
          f"({100 * within_pred / total:.0f}%)")
    # Every candidate's prediction (a forced run's tuner record is the
    # forced candidate's) over its measured time: which part of the model
    # is off, where the pick alone shows only the winner.
    print(f"# predicted over measured, every candidate ({np} ranks)")
    print(f"{'size(B)':>10} " + " ".join(f"{c:>12}" for c in cands))
    for size in sorted(auto):
        cells = []
        for c in cands:
            t, rec = measured[c].get(size, (None, None))
            cells.append(f"{rec['predicted_us'] / t:>12.2f}" if t and rec else f"{'-':>12}")
        print(f"{size:>10} " + " ".join(cells))
PY
