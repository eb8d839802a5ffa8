#!/usr/bin/env bash
# The agent's systemd unit as installed: `systemd-analyze verify` accepts
# it alone and with the fault-injection drop-in (every directive known,
# every command present), and its ExecStopPost command runs.
#   systemd_unit.sh BUILD_DIR
set -euo pipefail
build=${1:?build directory}
command -v systemd-analyze >/dev/null || { echo "systemd-analyze (Debian package systemd) is missing: skipped"; exit 77; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
prefix="$work/prefix"
cmake --install "$build" --prefix "$prefix" >/dev/null
unit="$prefix/lib/systemd/system/ringmaster-agent.service"
[[ -f "$unit" ]] || { echo "the unit is not installed at $unit" >&2; exit 1; }
# The unit names /usr/bin; here the commands are under the temporary prefix.
units="$work/units"
mkdir -p "$units/ringmaster-agent.service.d"
sed "s|/usr/bin/|$prefix/bin/|g" "$unit" >"$units/ringmaster-agent.service"
verify() {
  local out
  out=$(systemd-analyze verify --man=no "$units/ringmaster-agent.service" 2>&1) || true
  # Only what concerns this unit (the host's own units may warn too).
  out=$(grep -i "ringmaster" <<<"$out" || true)
  if [[ -n "$out" ]]; then
    echo "systemd-analyze verify ($1):" >&2
    echo "$out" >&2
    exit 1
  fi
  echo "systemd-analyze verify ($1): clean"
}
verify "the unit"
cp "$prefix/share/ringmaster/systemd/ringmaster-agent-faults.conf" "$units/ringmaster-agent.service.d/faults.conf"
verify "with the fault-injection drop-in"
# The drop-in adds the fault capabilities to the unit's.
grep -q "CapabilityBoundingSet=CAP_NET_ADMIN CAP_SYS_ADMIN" "$units/ringmaster-agent.service.d/faults.conf"
# ExecStopPost: reverts what a stopped agent left; nothing here.
stop_post=$(sed -n 's/^ExecStopPost=//p' "$units/ringmaster-agent.service" | sed "s|/var/lib/ringmaster|$work/state|")
$stop_post 2>&1 | grep -q "no fault left behind" || { echo "ExecStopPost failed: $stop_post" >&2; exit 1; }
echo "systemd unit check: passed"
