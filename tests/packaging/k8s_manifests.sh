#!/usr/bin/env bash
# packaging/k8s: every kustomization (base, overlays, examples) renders with
# Debian's kubectl (kustomize v2, which scripts/setup-deps extracts) and
# with the machine's own kubectl when it has a different one (kustomize v5
# here); every rendered object passes check_k8s.py (the Kubernetes API's
# published schemas, strictly); the Grafana dashboard is valid JSON whose
# every metric is one a live agent exposes.
#   k8s_manifests.sh BUILD_DIR
set -euo pipefail
build=$(cd "${1:?build directory}" && pwd)
source_dir=$(cd "$(dirname "$0")/../.." && pwd)
tools=${RINGMASTER_TOOLS_DIR:-/var/cache/ringmaster/tools}
python=${RINGMASTER_PYTHON_ENV:-/var/cache/ringmaster/venv}/bin/python
[[ -x "$tools/usr/bin/kubectl" ]] || { echo "$tools/usr/bin/kubectl is missing: run scripts/setup-deps --tests" >&2; exit 1; }
"$python" -c "import kubernetes_validate, kubeflow.training" 2>/dev/null ||
  { echo "kubernetes-validate or kubeflow-training missing in $python: run scripts/setup-deps --tests" >&2; exit 1; }
kubectls=("$tools/usr/bin/kubectl")
if command -v kubectl >/dev/null && ! cmp -s "$(command -v kubectl)" "$tools/usr/bin/kubectl"; then
  kubectls+=("$(command -v kubectl)")
fi
work=$(mktemp -d)
agent_pid=""
trap '[[ -n "$agent_pid" ]] && kill "$agent_pid" 2>/dev/null; rm -rf "$work"' EXIT

rendered=()
for k in $(cd "$source_dir" && find packaging/k8s -name kustomization.yaml | sort); do
  dir=$(dirname "$k")
  for kubectl in "${kubectls[@]}"; do
    version=$("$kubectl" version --client 2>/dev/null | grep -oE 'v1\.[0-9]+' | head -1)
    out="$work/$(tr / _ <<<"$dir")-$version.yaml"
    if ! "$kubectl" kustomize "$source_dir/$dir" >"$out" 2>"$work/err"; then
      echo "kubectl $version kustomize $dir failed:" >&2
      cat "$work/err" >&2
      exit 1
    fi
    echo "$dir with kubectl $version: $(grep -c '^kind:' "$out") objects ($(grep '^kind:' "$out" | cut -d' ' -f2 | sort | uniq | tr '\n' ' '))"
    rendered+=("$out")
  done
done
"$python" "$source_dir/tests/packaging/check_k8s.py" "${rendered[@]}"

# The dashboard: JSON, and its queries name only metrics an agent exposes.
dashboard="$source_dir/packaging/k8s/overlays/monitoring/ringmaster-dashboard.json"
"$python" -m json.tool "$dashboard" >/dev/null
chmod 711 "$work"
"$build/app/ringmaster-agent" --listen 127.0.0.1:0 --metrics 127.0.0.1:0 --print-port --state-dir "$work/state" \
  --rank-user "$(id -un)" >"$work/ports" 2>"$work/agent.log" &
agent_pid=$!
for _ in $(seq 100); do [[ -f "$work/ports" && $(wc -l <"$work/ports") -ge 2 ]] && break; sleep 0.1; done
metrics_port=$(sed -n 2p "$work/ports")
exposed=$(curl -sf "http://127.0.0.1:$metrics_port/metrics" | sed -n 's/^# TYPE \([a-z_]*\) .*/\1/p' | sort -u)
used=$(grep -o '"expr": "[^"]*"' "$dashboard" | grep -oE 'ringmaster_[a-z_]+' | sort -u)
unknown=$(comm -23 <(echo "$used") <(echo "$exposed"))
if [[ -n "$unknown" ]]; then
  echo "the dashboard queries metrics no agent exposes: $unknown" >&2
  exit 1
fi
echo "dashboard: $(grep -c '"type": "' "$dashboard") typed entries, $(wc -l <<<"$used") metrics, all exposed by the agent"
echo "k8s manifests: passed"
