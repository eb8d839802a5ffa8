#!/usr/bin/env bash
# How soon a retrying connect is named (issue figure: a dropped SYN within
# 5 s, a refused one within 1 s): a rank's `probe --json` in a network
# namespace whose nftables drops SYNs to one port, against that port and
# against one nothing listens on; the time from the rank's start to its
# first stage_progress line, on this script's clock. Needs root.
#   connect_classification.sh BUILD_DIR [RUNS]
set -euo pipefail
build=$(cd "${1:?build directory}" && pwd)
runs=${2:-5}
((EUID == 0)) || { echo "needs root (a network namespace)"; exit 77; }
ns=rm-bench-classify-$$
ip netns add "$ns"
trap 'ip netns del "$ns"' EXIT
ip netns exec "$ns" ip link set lo up
printf 'table inet sg { chain input { type filter hook input priority 0; tcp flags & (syn | ack) == syn tcp dport 29500 drop; }\n}\n' |
  ip netns exec "$ns" nft -f -
python3 - "$build/app/ringmaster-cli" "$ns" "$runs" <<'PY'
import json, os, statistics, subprocess, sys, time
cli, ns, runs = sys.argv[1], sys.argv[2], int(sys.argv[3])
def first_progress(port):
    env = dict(os.environ, RANK="1", WORLD_SIZE="2", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port),
               RINGMASTER_STORE_TIMEOUT="3")
    start = time.monotonic()
    p = subprocess.Popen(["ip", "netns", "exec", ns, cli, "probe", "--json"], stdout=subprocess.PIPE, env=env, text=True)
    try:
        for line in p.stdout:
            if '"stage_progress"' in line:
                return json.loads(line)["outcome"], time.monotonic() - start
    finally:
        p.kill()
        p.wait()
    return None, float("nan")
for port, aim in ((29500, 5.0), (29501, 1.0)):
    seen = [first_progress(port) for _ in range(runs)]
    outcomes = {o for o, _ in seen}
    times = [t for _, t in seen]
    print(f"MASTER_PORT {port}: {'/'.join(sorted(map(str, outcomes)))} named after "
          f"{min(times):.3f}-{max(times):.3f} s (median {statistics.median(times):.3f}) over {runs} runs; aim < {aim:.0f} s")
PY
