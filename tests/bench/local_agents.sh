# Sourced by the benchmarks that drive agents: start_local_agents N starts N
# real ringmaster-agents on loopback sharing one token, each with a state
# directory of its own, and sets `agents` (the --agents list) and `work`
# (a private directory holding the token); they stop when the script exits.
#   build=... ; source tests/bench/local_agents.sh ; start_local_agents 8
agent_pids=()
stop_local_agents() {
  for p in "${agent_pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
}
start_local_agents() {
  local n=$1 i t
  work=$(mktemp -d)
  trap stop_local_agents EXIT
  head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$work/token"
  chmod 600 "$work/token"
  for ((i = 0; i < n; i++)); do
    "$build/app/ringmaster-agent" --listen 127.0.0.1:0 --print-port --token-file "$work/token" \
      --state-dir "$work/state$i" --rank-user "$(id -un)" --log-level warn >"$work/port$i" 2>"$work/log$i" &
    agent_pids+=($!)
  done
  agents=""
  for ((i = 0; i < n; i++)); do
    for ((t = 0; t < 100; t++)); do
      [[ -s "$work/port$i" ]] && break
      if ! kill -0 "${agent_pids[$i]}" 2>/dev/null; then
        echo "agent $i did not start:" >&2
        cat "$work/log$i" >&2
        exit 1
      fi
      sleep 0.1
    done
    agents+="${agents:+,}127.0.0.1:$(head -1 "$work/port$i")"
  done
}
