#!/usr/bin/env bash
# The .deb packages on a clean Debian 12: builds them from BUILD_DIR (cpack),
# makes a minimal root filesystem with mmdebstrap from this machine's apt
# sources (cached, see below), installs ringmaster-agent into it with apt
# (its dependencies from the archive), starts the installed agent there
# the way its systemd unit does, and drives it from the build's CLI: the
# readiness probe, an inventory and a 2-rank run. With --image it then
# builds the agent's container image from packaging/container/Containerfile
# on that root filesystem (podman) and does the same against the container.
#   deb_rootfs.sh BUILD_DIR [--image]
# Needs root (chroot, mounts). Caches, outside any clone: the root
# filesystem tarball (rebuilt when the apt sources change or after 14
# days), apt's downloaded packages and lists, in RINGMASTER_PACKAGING_CACHE
# (default /var/cache/ringmaster/packaging).
set -euo pipefail
build=$(cd "${1:?build directory}" && pwd)
image=0
[[ "${2:-}" == "--image" ]] && image=1
source_dir=$(cd "$(dirname "$0")/../.." && pwd)
cli="$build/app/ringmaster-cli"

((EUID == 0)) || { echo "needs root (chroot and mounts): skipped"; exit 77; }
for tool in mmdebstrap cpack curl; do
  command -v "$tool" >/dev/null || { echo "$tool is missing (scripts/setup-deps installs it)" >&2; exit 1; }
done

# Mounts made below vanish with this mount namespace, whatever ends the script.
if [[ -z "${RINGMASTER_IN_PRIVATE_MOUNTS:-}" ]]; then
  RINGMASTER_IN_PRIVATE_MOUNTS=1 exec unshare --mount --propagation private "$0" "$@"
fi

cache=${RINGMASTER_PACKAGING_CACHE:-/var/cache/ringmaster/packaging}
mkdir -p "$cache/apt-archives/partial" "$cache/apt-lists/partial"
work=$(mktemp -d /tmp/ringmaster-deb.XXXXXX)
agent_pid=""
mounts=()
mount_in() {  # mount_in TARGET MOUNT-ARGS...: remembered for the clean-up
  local target=$1
  shift
  mount "$@" "$target"
  mounts+=("$target")
}
cleanup() {
  set +e
  if [[ -n "$agent_pid" ]]; then
    kill "$agent_pid" 2>/dev/null
    wait "$agent_pid" 2>/dev/null
  fi
  if [[ -n "${container:-}" ]]; then podman rm -f "$container" >/dev/null 2>&1 || true; fi
  if [[ -n "${image_name:-}" ]]; then podman rmi -f "$image_name" "$base_image" >/dev/null 2>&1 || true; fi
  for ((i = ${#mounts[@]} - 1; i >= 0; i--)); do
    umount "${mounts[i]}" 2>/dev/null || umount -l "${mounts[i]}" || true
  done
  # Never into a mount: a bind of the host's /sys or an apt cache must not
  # be emptied by the removal of the scratch tree.
  if grep -qF " $work/" /proc/self/mounts; then
    echo "mounts remain under $work; left in place" >&2
  else
    rm -rf --one-file-system "$work"
  fi
}
trap cleanup EXIT
step() { echo "== $(date +%T) $*"; }

step "packages from $build"
(cd "$build" && cpack -G DEB -B "$work/debs" >"$work/cpack.log" 2>&1) || { cat "$work/cpack.log" >&2; exit 1; }
agent_deb=$(ls "$work"/debs/ringmaster-agent_*.deb)
ls -l "$work"/debs/*.deb | awk '{print "  " $5, $9}'

# This machine's apt sources (deb822 or one-line).
sources=/etc/apt/sources.list.d/debian.sources
[[ -f "$sources" ]] || sources=/etc/apt/sources.list
# rootfs NAME [mmdebstrap options]: the cached tarball's path, made first
# when missing, when the sources or options changed, or after 14 days.
rootfs() {
  local name=$1
  shift
  local key tarball
  key=$( (cat "$sources"; echo "variant=apt $*"; mmdebstrap --version) | sha256sum | cut -c1-16)
  tarball="$cache/$name-$key.tar"
  if [[ ! -f "$tarball" || -n "$(find "$tarball" -mtime +14)" ]]; then
    step "a Debian 12 root filesystem ($name) with mmdebstrap, cached as $tarball" >&2
    rm -f "$cache/$name"-????????????????.tar
    mmdebstrap --quiet --variant=apt --mode=root "$@" bookworm "$cache/partial-$key.tar" "$sources" >&2
    mv "$cache/partial-$key.tar" "$tarball"
  fi
  echo "$tarball"
}
tarball=$(rootfs debian12)

root="$work/root"
step "installing $(basename "$agent_deb") into a fresh copy with apt"
mkdir -p "$root"
tar -C "$root" -xf "$tarball"
cp /etc/resolv.conf "$root/etc/resolv.conf"
# The tarball has /dev's few nodes; /sys (read-only, without the mounts
# under it) is for hwloc's discovery, /dev/shm for the ranks' shared memory.
mount_in "$root/var/cache/apt/archives" --bind "$cache/apt-archives"
mount_in "$root/var/lib/apt/lists" --bind "$cache/apt-lists"
mount_in "$root/proc" -t proc proc
mount_in "$root/sys" --bind -o ro /sys
mount_in "$root/dev/shm" -t tmpfs -o size=256m tmpfs
cp "$agent_deb" "$root/tmp/"
export DEBIAN_FRONTEND=noninteractive
chroot "$root" apt-get -q update >"$work/apt.log" 2>&1 || { cat "$work/apt.log" >&2; exit 1; }
chroot "$root" apt-get -q install -y "/tmp/$(basename "$agent_deb")" >>"$work/apt.log" 2>&1 ||
  { cat "$work/apt.log" >&2; exit 1; }
grep -E "^(Setting up|Unpacking) ringmaster" "$work/apt.log" | sed 's/^/  /'

step "what the package set up"
chroot "$root" getent passwd ringmaster | grep -q ":/usr/sbin/nologin$" || { echo "no ringmaster system user" >&2; exit 1; }
[[ "$(stat -c %a "$root/etc/ringmaster/token")" == "600" ]] || { echo "token is not mode 0600" >&2; exit 1; }
[[ $(wc -c <"$root/etc/ringmaster/token") -ge 33 ]] || { echo "token too short" >&2; exit 1; }
grep -qx "RINGMASTER_AGENT_RANK_USER=ringmaster" "$root/etc/default/ringmaster-agent" ||
  { echo "/etc/default/ringmaster-agent does not name the rank user" >&2; exit 1; }
# Read whole before grep: grep -q stops at the first line, and the CLI,
# writing a list longer than one pipe write, then dies of SIGPIPE (pipefail).
catalog=$(chroot "$root" ringmaster-cli repro list)
grep -q "scenarios in /usr/share/ringmaster/scenarios" <<<"$catalog" ||
  { echo "the installed CLI does not find its scenario catalog" >&2; exit 1; }
chroot "$root" man -w ringmaster-agent >/dev/null 2>&1 || [[ -f "$root/usr/share/man/man1/ringmaster-agent.1" ]]
echo "  user ringmaster, token 0600, settings, catalog and man page in place"

# Two free ports below the ephemeral range.
free_port() {
  python3 -c 'import socket,random
while True:
  p=random.randint(20000,32000); s=socket.socket()
  try: s.bind(("0.0.0.0",p)); print(p); break
  except OSError: pass'
}
port=$(free_port)
metrics=$(free_port)
# As an admin would: the settings file says where to listen.
sed -i "s|^RINGMASTER_AGENT_LISTEN=.*|RINGMASTER_AGENT_LISTEN=127.0.0.1:$port|; s|^RINGMASTER_AGENT_OPTIONS=.*|RINGMASTER_AGENT_OPTIONS=\"--metrics 127.0.0.1:$metrics\"|" \
  "$root/etc/default/ringmaster-agent"

# The unit's ExecStart with the unit's environment and the settings file,
# as systemd would expand it (no systemd runs in the root filesystem).
unit="$root/usr/lib/systemd/system/ringmaster-agent.service"
exec_start=$(sed -n 's/^ExecStart=//p' "$unit")
start_agent() {  # start_agent ROOT: the unit's command, in ROOT
  (
    set +u  # systemd expands an unset variable to nothing
    set -a
    eval "$(sed -n 's/^Environment=//p' "$unit")"
    set +a
    # EnvironmentFile= as systemd reads it: KEY=VALUE lines, the value the
    # rest of the line, surrounding quotes removed.
    while IFS= read -r line; do
      [[ "$line" =~ ^[A-Za-z_][A-Za-z0-9_]*= ]] || continue
      value=${line#*=}
      [[ "$value" == \"*\" ]] && value=${value:1:${#value}-2}
      export "${line%%=*}=$value"
    done <"$1/etc/default/ringmaster-agent"
    eval "exec chroot \"$1\" $exec_start"
  ) >"$work/agent.log" 2>&1 &
  agent_pid=$!
}
wait_ready() {  # wait_ready PORT: /readyz answers 200 within 30 s
  for _ in $(seq 300); do
    if curl -sf "http://127.0.0.1:$1/readyz" >/dev/null 2>&1; then return 0; fi
    if [[ -n "$agent_pid" ]] && ! kill -0 "$agent_pid" 2>/dev/null; then break; fi
    sleep 0.1
  done
  echo "the agent never became ready:" >&2
  cat "$work/agent.log" >&2
  return 1
}
drive() {  # drive TOKEN_FILE CERT: inventory and a 2-rank run through the agent, over TLS checked against CERT
  local inventory
  # What we ship serves TLS with the agent's own certificate: a plain
  # client is turned away.
  if "$cli" remote --agents "127.0.0.1:$port" --token-file "$1" --timeout 5 inventory >/dev/null 2>&1; then
    echo "the shipped agent answered a plain TCP client" >&2
    return 1
  fi
  inventory=$("$cli" remote --agents "127.0.0.1:$port" --token-file "$1" --tls-ca "$2" inventory)
  grep -q '"transports"' <<<"$inventory" || { echo "no inventory: $inventory" >&2; return 1; }
  echo "  inventory: $(grep -o '"hostname":"[^"]*"' <<<"$inventory" | head -1)"
  "$cli" remote --agents "127.0.0.1:$port" --token-file "$1" --tls-ca "$2" --np-per-agent 2 --timeout 120 \
    perf all_reduce -b 1M -e 1M -n 5 -w 1 >"$work/run.txt" 2>&1 || { cat "$work/run.txt" "$work/agent.log" >&2; return 1; }
  grep -E "^ +1048576 " "$work/run.txt" | head -1 | sed 's/^/  result row: /'
  grep -qE "^ +1048576 " "$work/run.txt" || { cat "$work/run.txt" >&2; return 1; }
}

step "starting the installed agent as its unit does"
start_agent "$root"
wait_ready "$metrics"
curl -s "http://127.0.0.1:$metrics/healthz" | grep -qx ok
drive "$root/etc/ringmaster/token" "$root/var/lib/ringmaster/tls/agent.crt"
# The ranks ran as the run's own uid (--rank-uids, 61000-61183 by default,
# with the rank user's groups), in the agent's state directory: what they
# wrote there (their calibration cache) is that uid's, and once the run
# ended the directory went back to the agent.
rundir="$root/$(cd "$root" && ls -d var/lib/ringmaster/runs/*/ | head -1)"
dir_owner=$(stat -c %u "$rundir")
writers=$(find "$rundir" -mindepth 1 -printf '%U\n' | sort -u)
[[ "$dir_owner" == 0 ]] || { echo "the finished run's directory still belongs to uid $dir_owner" >&2; exit 1; }
[[ -n "$writers" ]] || { echo "the ranks wrote nothing in their run's directory" >&2; exit 1; }
for uid in $writers; do
  ((uid >= 61000 && uid <= 61183)) || { echo "the ranks wrote as uid $uid, not a run's own uid" >&2; exit 1; }
done
echo "  ranks ran as uid $writers, their run's own; its directory is the agent's again"
kill "$agent_pid"
wait "$agent_pid" 2>/dev/null || true
agent_pid=""

if ((image == 0)); then
  echo "deb_rootfs: passed"
  exit 0
fi

# The container image: the same root filesystem as its base (no registry
# is needed), the Containerfile installs the .deb, run with the host's
# network. Podman's settings for these machines in a private file: runc as
# the runtime, and descriptor and process limits the container's runtime
# may set: within the host's hard limits, and for processes within the
# 32768 podman leaves to conmon (a higher one is refused at start).
command -v podman >/dev/null || { echo "podman is missing (scripts/setup-deps installs it)" >&2; exit 1; }
nofile=$(ulimit -Hn)
nproc=$(ulimit -Hu)
[[ "$nofile" == unlimited ]] && nofile=1048576
[[ "$nproc" == unlimited || "$nproc" -gt 32768 ]] && nproc=32768
export CONTAINERS_CONF="$work/containers.conf"
cat >"$CONTAINERS_CONF" <<EOF
[containers]
default_ulimits = ["nofile=$nofile:$nofile", "nproc=$nproc:$nproc"]
[engine]
runtime = "runc"
EOF
tag=$$
base_image="localhost/ringmaster-test-base:$tag"
image_name="localhost/ringmaster-agent-test:$tag"
step "container image from packaging/container/Containerfile"
# The base as Debian's own debian:12-slim is made: no manuals, docs beyond
# copyright files, or translations.
slim=(--dpkgopt=path-exclude=/usr/share/man/* --dpkgopt=path-exclude=/usr/share/doc/*
  --dpkgopt=path-include=/usr/share/doc/*/copyright --dpkgopt=path-exclude=/usr/share/info/*
  --dpkgopt=path-exclude=/usr/share/locale/* --dpkgopt=path-include=/usr/share/locale/locale.alias
  --dpkgopt=path-exclude=/usr/share/groff/* --dpkgopt=path-exclude=/usr/share/lintian/*)
slim_tarball=$(rootfs debian12-slim "${slim[@]}")
podman import -q "$slim_tarball" "$base_image" >/dev/null
echo "  base (as debian:12-slim): $(($(podman image inspect --format '{{.Size}}' "$base_image") / 1000000)) MB"
context="$work/context"
mkdir -p "$context"
cp "$agent_deb" "$context/"
ulimits=(--ulimit "nofile=$nofile:$nofile" --ulimit "nproc=$nproc:$nproc")  # RUN steps do not read default_ulimits
podman build -q --network host "${ulimits[@]}" --build-arg "BASE=$base_image" \
  -f "$source_dir/packaging/container/Containerfile" -t "$image_name" "$context" >"$work/build.log" 2>&1 ||
  { cat "$work/build.log" >&2; exit 1; }
size=$(podman image inspect --format '{{.Size}}' "$image_name")
echo "  image $image_name: $((size / 1000000)) MB"
((size <= 200 * 1000 * 1000)) || { echo "the image is over 200 MB" >&2; exit 1; }

step "running the image with --network host"
token_dir="$work/secret"
mkdir -p "$token_dir"
head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$token_dir/token"
chmod 0600 "$token_dir/token"
container=$(podman run -d --network host -v "$token_dir:/etc/ringmaster:ro" \
  -e RINGMASTER_AGENT_LISTEN="127.0.0.1:$port" \
  -e RINGMASTER_AGENT_OPTIONS="--metrics 127.0.0.1:$metrics" "$image_name")
if ! wait_ready "$metrics"; then
  podman logs "$container" >&2
  exit 1
fi
podman cp "$container:/var/lib/ringmaster/tls/agent.crt" "$work/image-agent.crt"
drive "$token_dir/token" "$work/image-agent.crt"
echo "deb_rootfs: passed (packages, root filesystem and image)"
