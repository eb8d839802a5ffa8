#!/usr/bin/env python3
"""Lists the tests ctest skipped, with their reasons, from its JUnit file.

    tests/skip_report.py JUNIT_XML [--strict]

A gtest binary prints `ringmaster-skip: Suite.Name: reason` for each test
it skipped (tests/support/gtest_main.cpp), Qt Test `SKIP   : Class::name()
reason`, a script its last line. With --strict (./test.sh under CI=1), a
skip whose reason names a part this machine has (root, nftables,
libfabric, mpirun, torch, lstopo, openssl, etcd, Xvfb, chromium) fails: a green
suite must not hide tests that could have run. docs/testing.md lists what
may skip, and where.
"""
import os
import re
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET

# Each part: the words a skip reason names it by, and whether it is here.
def has_libfabric():
    if not shutil.which("fi_info"):
        return False
    probe = subprocess.run(["fi_info", "-p", "tcp"], capture_output=True)
    return probe.returncode == 0


def has_torch():
    venv = os.environ.get("RINGMASTER_PYTHON_ENV", "/var/cache/ringmaster/venv")
    return os.access(os.path.join(venv, "bin", "torchrun"), os.X_OK)


def has_tool(name, extra_dirs=()):
    return shutil.which(name) is not None or any(os.access(os.path.join(d, name), os.X_OK) for d in extra_dirs)


PARTS = [
    ("root", r"\bneeds? root\b|\bas root\b", lambda: os.geteuid() == 0),
    ("nftables", r"\bnft\b|nftables", lambda: has_tool("nft")),
    ("libfabric", r"libfabric|\bfi_info\b", has_libfabric),
    ("mpirun", r"\bmpirun\b|openmpi", lambda: has_tool("mpirun")),
    ("torch", r"\btorch(run)?\b", has_torch),
    ("lstopo", r"lstopo", lambda: has_tool("lstopo-no-graphics")),
    ("openssl", r"\bopenssl\b", lambda: has_tool("openssl")),
    ("etcd", r"\betcd\b", lambda: has_tool("etcd", ["/var/cache/ringmaster/tools/usr/bin"])),
    ("Xvfb", r"\bXvfb\b|\bxvfb", lambda: has_tool("Xvfb")),
    ("chromium", r"\bchromium\b", lambda: has_tool("chromium") and has_tool("pdftotext")),
]


def reasons(output):
    """Each distinct reason once, with how many cases gave it and the first."""
    found = {}
    lines = output.splitlines()
    for line in lines:
        m = re.match(r"ringmaster-skip: (\S+): (.*)", line)
        if m and not re.match(r"\d+ of \d+ tests skipped", line[len("ringmaster-skip: "):]):
            case, why = m.group(1), m.group(2)
        else:
            m = re.match(r"SKIP\s+: (\S+) (.*)", line)
            if not m:
                continue
            case, why = m.group(1), m.group(2)
        first, count = found.get(why, (case, 0))
        found[why] = (first, count + 1)
    if not found:
        last = [l for l in lines if l.strip()]
        return [last[-1].strip() if last else "(no output)"]
    out = []
    for why, (first, count) in found.items():
        cases = f"{first}" if count == 1 else f"{count} cases, {first} first"
        out.append(f"{why} ({cases})")
    return out


def main():
    if len(sys.argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    strict = "--strict" in sys.argv[2:]
    try:
        suite = ET.parse(sys.argv[1]).getroot()
    except (OSError, ET.ParseError) as e:
        print(f"skip_report: cannot read {sys.argv[1]}: {e}", file=sys.stderr)
        return 2
    skipped = []
    for case in suite.iter("testcase"):
        if case.find("skipped") is None:
            continue
        out = case.findtext("system-out") or ""
        skipped.append((case.get("name"), reasons(out)))
    present = [(name, words) for name, words, here in PARTS if here()]
    hidden = []
    print(f"== Skipped tests: {len(skipped)}")
    for name, why in skipped:
        for reason in why:
            print(f"  {name}: {reason}")
            for part, words in present:
                if re.search(words, reason, re.IGNORECASE):
                    hidden.append((name, reason, part))
    if hidden:
        print(f"== Skips of parts this machine has: {len(hidden)}")
        for name, reason, part in hidden:
            print(f"  {name} skipped though this machine has {part}: {reason}")
        if strict:
            print("skip_report: failing the run (CI=1): a present part was not tested", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
