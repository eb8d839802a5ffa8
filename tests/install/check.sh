#!/usr/bin/env bash
# The engine as another program uses it: installs the build's engine
# components into a temporary prefix (cmake --install), then builds a
# program outside the tree against them twice, through the CMake package
# (find_package(Ringmaster)) and through pkg-config, and runs each: a
# 2-rank all_reduce that must find every element right. Then everything
# installed together: the programs with their man pages (rendered by man),
# bash completion (completing real command lines in bash), the console's
# desktop entry (desktop-file-validate) and icon, and the docs.
#   check.sh BUILD_DIR
set -euo pipefail
build=${1:?build directory}
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
prefix="$work/prefix"
for component in engine engine_dev; do
  cmake --install "$build" --prefix "$prefix" --component "$component" >/dev/null
done
config=$(find "$prefix" -name RingmasterConfig.cmake)
pc=$(find "$prefix" -name ringmaster.pc)
[[ -n "$config" && -n "$pc" ]] || { echo "install lacks RingmasterConfig.cmake or ringmaster.pc" >&2; exit 1; }
echo "installed: $(cd "$prefix" && find . -type f | sort | tr '\n' ' ')"
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

# 1. find_package(Ringmaster) and Ringmaster::ringmaster.
cmake -S "$here/consumer" -B "$work/cmake-consumer" -G Ninja -DCMAKE_PREFIX_PATH="$prefix" \
  -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$work/cmake-consumer" | tail -n 20
"$work/cmake-consumer/two_rank_all_reduce" "$(free_port)"

# 2. pkg-config, as a Makefile would.
export PKG_CONFIG_PATH
PKG_CONFIG_PATH=$(dirname "$pc")
echo "pkg-config ringmaster: $(pkg-config --modversion ringmaster): $(pkg-config --cflags --libs ringmaster)"
libdir=$(pkg-config --variable=libdir ringmaster)
# shellcheck disable=SC2046  # pkg-config's flags are words
g++ -O2 -o "$work/pc-consumer" "$here/consumer/two_rank_all_reduce.cpp" $(pkg-config --cflags --libs ringmaster) \
  -Wl,-rpath,"$libdir"
"$work/pc-consumer" "$(free_port)"

# 3. Everything: programs, man pages, completion, desktop entry, docs.
full="$work/full"
cmake --install "$build" --prefix "$full" >/dev/null
fail() { echo "install check: $*" >&2; exit 1; }
programs=(ringmaster-cli ringmaster-agent)
[[ -x "$full/bin/ringmaster" ]] && programs+=(ringmaster ringmaster-history)
for p in "${programs[@]}"; do
  "$full/bin/$p" --version | grep -q "^$p " || fail "$p --version"
  page="$full/share/man/man1/$p.1"
  [[ -f "$page" ]] || fail "no man page $page"
  # Rendered: the NAME line and, for the CLI, a subcommand's own flag.
  text=$(MANWIDTH=120 man --warnings=w -l "$page" 2>&1)
  grep -q "^NAME" <<<"$text" || fail "$page renders without NAME"
  [[ "$p" != ringmaster-cli ]] || grep -q -- "--stepfactor" <<<"$text" || fail "$page lacks perf's options"
  [[ -f "$full/share/bash-completion/completions/$p" ]] || fail "no completion for $p"
done
# Completion, as bash runs it on <TAB>: COMP_WORDS in, COMPREPLY out (sorted).
complete_line() {  # PROGRAM WORD... (the last word is being completed)
  local program=$1
  shift
  bash -c 'source "$1"; shift; COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); "$(complete -p "$1" | sed "s/.* -F \([^ ]*\) .*/\1/")"; echo $(printf "%s\n" "${COMPREPLY[@]}" | sort)' \
    _ "$full/share/bash-completion/completions/$program" "$program" "$@"
}
[[ "$(complete_line ringmaster-cli pe)" == "perf" ]] || fail "ringmaster-cli pe<TAB>: $(complete_line ringmaster-cli pe)"
[[ "$(complete_line ringmaster-cli perf --json)" == "--json --json-file" ]] ||
  fail "ringmaster-cli perf --json<TAB>: $(complete_line ringmaster-cli perf --json)"
[[ "$(complete_line ringmaster-cli store serve --li)" == "--listen" ]] || fail "store serve --li<TAB>"
[[ "$(complete_line ringmaster-cli remote perf -b 8 --al)" == "--algo --allow-mixed-nodes" ]] ||
  fail "remote perf -b 8 --al<TAB>: $(complete_line ringmaster-cli remote perf -b 8 --al)"
[[ "$(complete_line ringmaster-agent --token)" == "--token-file" ]] || fail "ringmaster-agent --token<TAB>"
if [[ -x "$full/bin/ringmaster" ]]; then
  [[ "$(complete_line ringmaster --np)" == "--np-per-agent" ]] || fail "ringmaster --np<TAB>"
  desktop-file-validate "$full/share/applications/ringmaster.desktop" || fail "the desktop entry is not valid"
  icon=$(sed -n 's/^Icon=//p' "$full/share/applications/ringmaster.desktop")
  [[ -f "$full/share/icons/hicolor/scalable/apps/$icon.svg" ]] || fail "no icon $icon.svg"
fi
[[ -f "$full/share/doc/ringmaster/console.md" && -f "$full/share/doc/ringmaster/LICENSE" ]] || fail "docs not installed"
# The installed CLI reads the installed scenario catalog, not the build
# machine's source tree.
# (sed reads the whole list: head closes the pipe after its line, and once
# the list is longer than the CLI's first 4 KiB write, as 14 scenarios are,
# the CLI dies of SIGPIPE and pipefail fails the line.)
catalog=$("$full/bin/ringmaster-cli" repro list | sed -n 1p)
[[ "$catalog" == *" in $full/share/ringmaster/scenarios" ]] || fail "repro's catalog is not the installed one: $catalog"
[[ "$("$full/bin/ringmaster-cli" repro list | grep -c '^[a-z0-9-]\+  ')" -ge 10 ]] || fail "repro list from the install"
[[ -f "$full/share/ringmaster/topologies/p4d-24xl-topo.xml" ]] || fail "topologies not installed"
echo "installed programs: ${programs[*]}, with man pages, completion and docs"
echo "install check: passed"
