#!/usr/bin/env bash
# Init of N ranks (`ringmaster-cli probe --np N`, threads of one process)
# over each rendezvous store in turns: the TCPStore rank 0 hosts, and a
# real etcd on loopback (RINGMASTER_STORE=etcd://...). Prints each run's
# wall time as probe measured it, then the medians.
#   tests/bench/store_backends.sh [build-dir] [ranks] [runs]
set -euo pipefail
build=${1:-build/release}
n=${2:-64}
runs=${3:-3}
cli="$build/app/ringmaster-cli"
etcd=${RINGMASTER_ETCD:-/var/cache/ringmaster/tools/usr/bin/etcd}
[[ -x "$etcd" ]] || { echo "store_backends: no etcd at $etcd (scripts/setup-deps --tests)" >&2; exit 2; }
client=$((21000 + RANDOM % 4000))
peer=$((client + 4000))
data=$(mktemp -d)
"$etcd" --name bench --data-dir "$data/etcd" --log-level error \
  --listen-client-urls "http://127.0.0.1:$client" --advertise-client-urls "http://127.0.0.1:$client" \
  --listen-peer-urls "http://127.0.0.1:$peer" --initial-advertise-peer-urls "http://127.0.0.1:$peer" \
  --initial-cluster "bench=http://127.0.0.1:$peer" >"$data/etcd.log" 2>&1 &
etcd_pid=$!
trap 'kill $etcd_pid 2>/dev/null; wait $etcd_pid 2>/dev/null; rm -rf "$data"' EXIT
for ((i = 0; i < 100; i++)); do
  if (exec 3<>"/dev/tcp/127.0.0.1/$client") 2>/dev/null; then break; fi
  sleep 0.1
done
wall() {  # the summary's wall_ms of one probe run
  "$@" --json | sed -n 's/.*"type":"summary".*"wall_ms":\([0-9.]*\).*/\1/p; s/.*"wall_ms":\([0-9.]*\).*"type":"summary".*/\1/p'
}
tcp=() over_etcd=()
for ((run = 0; run < runs; run++)); do
  port=$((20000 + RANDOM % 900))
  t=$(wall "$cli" probe --np "$n" --master-addr 127.0.0.1 --master-port "$port")
  e=$(RINGMASTER_STORE="etcd://127.0.0.1:$client/bench$run" wall "$cli" probe --np "$n")
  printf 'run %d: %d ranks, TCPStore %.1f ms, etcd %.1f ms\n' "$run" "$n" "$t" "$e"
  tcp+=("$t") over_etcd+=("$e")
done
median() { printf '%s\n' "$@" | sort -g | sed -n "$((($# + 1) / 2))p"; }
echo "median: TCPStore $(median "${tcp[@]}") ms, etcd $(median "${over_etcd[@]}") ms"
