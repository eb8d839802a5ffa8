#!/usr/bin/env bash
# tests/skip_report.py on JUnit files made here: a skip whose reason names
# a part this machine has fails under --strict and passes without it; a
# skip of a part it lacks passes both ways; a run without skips says so.
set -euo pipefail
report=$(dirname "$0")/skip_report.py
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
junit() {  # junit FILE NAME OUTPUT
  cat >"$1" <<XML
<?xml version="1.0" encoding="UTF-8"?>
<testsuite name="t" tests="2" failures="0" skipped="1">
  <testcase name="$2" classname="$2" time="0.1" status="notrun">
    <skipped message="SKIP_RETURN_CODE=77"/>
    <system-out>$3</system-out>
  </testcase>
  <testcase name="ran" classname="ran" time="0.1" status="run"><system-out>ok</system-out></testcase>
</testsuite>
XML
}
command -v openssl >/dev/null || fail "openssl is not installed (scripts/setup-deps installs it)"
junit "$dir/present.xml" agent_test "ringmaster-skip: Agent.Tls: openssl (Debian package openssl) cannot make a test certificate
ringmaster-skip: 1 of 2 tests skipped, none failed; exit 77 tells ctest"
out=$(python3 "$report" "$dir/present.xml" --strict 2>&1) && fail "a skip of openssl passed --strict: $out"
grep -q "agent_test skipped though this machine has openssl" <<<"$out" || fail "the present part is not named: $out"
python3 "$report" "$dir/present.xml" >/dev/null || fail "without --strict a skip fails the run"
junit "$dir/absent.xml" gpu_kernels_test "ringmaster-skip: Gpu.A: no CUDA device: no NVIDIA driver
ringmaster-skip: Gpu.B: no CUDA device: no NVIDIA driver"
out=$(python3 "$report" "$dir/absent.xml" --strict) || fail "a GPU skip failed --strict: $out"
grep -q "gpu_kernels_test: no CUDA device: no NVIDIA driver (2 cases, Gpu.A first)" <<<"$out" || fail "not listed: $out"
cat >"$dir/none.xml" <<XML
<?xml version="1.0" encoding="UTF-8"?>
<testsuite name="t" tests="1"><testcase name="ran" classname="ran" status="run"/></testsuite>
XML
out=$(python3 "$report" "$dir/none.xml" --strict) || fail "no skips failed: $out"
grep -q "== Skipped tests: 0" <<<"$out" || fail "no skips not said: $out"
echo "skip_report: present parts fail --strict, absent ones pass, each listed with its reason"
