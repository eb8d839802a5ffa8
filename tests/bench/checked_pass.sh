# Sourced by the benchmarks that time `ringmaster-cli perf` with checking
# off (-c 0, as nccl-tests' timed runs): before any timed run, one pass of
# the same collective over the same ranks and transport with every element
# checked, so no figure comes from a build that computes wrong results.
# Fails the benchmark (perf exits non-zero) when any element is wrong.
#   checked_pass CLI COLLECTIVE RANKS [more perf options, e.g. --candidates LIST]
checked_pass() {
  local cli=$1 collective=$2 np=$3
  shift 3
  local out
  if ! out=$("$cli" perf "$collective" --np "$np" -b 8 -e 16M -f 8 -n 1 -w 1 -c 1 --no-stages "$@" 2>&1); then
    printf '%s\n' "$out" >&2
    echo "checked pass of $collective on $np ranks failed: wrong results or a failed run" >&2
    return 1
  fi
  echo "# checked pass before timing: $collective, $np ranks, 8 B .. 16 MiB, every element:" \
    "$(grep -o 'Out of bounds values : .*' <<<"$out")"
}
