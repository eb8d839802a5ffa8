#!/usr/bin/env bash
# A scenario whose fault the agents cannot apply for real is skipped, never
# passed on a stand-in. The agents here lack CAP_NET_ADMIN, as in a
# container without it (setpriv drops it from their bounding set), so
# nftables refuses them and a drop falls back to the engine's in-process
# connect filter; `repro run` must then report the scenario SKIPPED with
# that reason and exit 77. It reported PASS before.
#   stand_in_skips.sh BUILD_DIR
set -euo pipefail
build=$(cd "${1:?build directory}" && pwd)
((EUID == 0)) || { echo "needs root (network namespaces): skipped"; exit 77; }
command -v setpriv >/dev/null || { echo "setpriv (util-linux) is missing" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# The runner starts the ringmaster-agent beside itself: here, the real one
# without CAP_NET_ADMIN.
cp "$build/app/ringmaster-cli" "$work/ringmaster-cli"
cat >"$work/ringmaster-agent" <<WRAP
#!/bin/sh
exec setpriv --bounding-set -net_admin --inh-caps -net_admin "$build/app/ringmaster-agent" "\$@"
WRAP
chmod +x "$work/ringmaster-agent"
status=0
"$work/ringmaster-cli" repro run sg-ephemeral-lost >"$work/out" 2>&1 || status=$?
cat "$work/out"
[[ $status -eq 77 ]] || { echo "expected exit 77 (skipped), got $status" >&2; exit 1; }
grep -q "SKIPPED" "$work/out" || { echo "no SKIPPED line" >&2; exit 1; }
grep -q "could not drop packets with nftables" "$work/out" || { echo "the reason is not given" >&2; exit 1; }
grep -q "via connect_filter" "$work/out" || { echo "the agents applied the fault for real: CAP_NET_ADMIN was not dropped" >&2; exit 1; }
echo "stand-in scenario skipped: passed"
