#!/usr/bin/env python3
"""The modules' layering (docs/collectives.md, How the code is laid out), beside the engine's own folders
(include_layering.cmake): what each module may include.

- engine: neither the agent, nor the console, nor Qt;
- agent: the engine through its public headers (ringmaster/...) only, no
  Qt, no console;
- ui (the console): the agent's protocol types (ringmaster/agent/...),
  which carry the engine's records it shows, and of the engine's own
  headers only those both sides share (UI_FROM_ENGINE); never the agent's
  server (ringmaster/agent/server.h: the console starts agents as
  processes);
- app: any module's public headers, never an engine folder.

Fails listing every include that breaks a rule.

Usage: module_layering.py ROOT [--self-test]
"""
import pathlib
import re
import sys

# The engine headers the console includes itself, each with why.
UI_FROM_ENGINE = {
    "ringmaster/status.h": "Status and Error, which every module throws and reads",
    "ringmaster/version.h": "the version the About box and the node gate show",
    # The Simulation tab predicts a declared cluster's busbw beside the
    # measured one with no agent to ask: the engine's simulator in-process.
    "ringmaster/tools/simulate.h": "the simulator, run in the console's process",
}

INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^">]+)[">]')
QT = re.compile(r"^Q[A-Z]\w*$|^Qt\w*/|^Qt[A-Z]\w*$")


def broken(module, header, quoted, engine_folders):
    """Why `module` may not include `header`, or None."""
    first = header.split("/")[0]
    if module == "engine":
        if header.startswith("ringmaster/agent/"):
            return "the engine includes the agent"
        if quoted and first in ("models", "panels"):
            return "the engine includes the console"
        if QT.match(header):
            return "the engine includes Qt"
        return None
    if quoted and first in engine_folders:
        return f"{module} includes the engine's internals ({first}/), not its public headers"
    if module == "agent":
        if QT.match(header):
            return "the agent includes Qt"
        if quoted and first in ("models", "panels"):
            return "the agent includes the console"
    if module == "ui" and header == "ringmaster/agent/server.h":
        return "the console includes the agent's server (it starts agents as processes)"
    if module == "ui" and quoted and first == "ringmaster" and not header.startswith("ringmaster/agent/"):
        if header not in UI_FROM_ENGINE:
            return "the console reaches the engine's types through the agent's protocol (ringmaster/agent/...)"
    return None


def check(root, engine_folders):
    problems = []
    for module in ("engine", "agent", "ui", "app"):
        for path in sorted((root / module).rglob("*")):
            if path.suffix not in (".h", ".cpp", ".cu") or "build" in path.parts:
                continue
            rel = path.relative_to(root).as_posix()
            for n, line in enumerate(path.read_text(encoding="utf-8", errors="replace").split("\n"), 1):
                m = INCLUDE.match(line)
                if not m:
                    continue
                why = broken(module, m.group(2), m.group(1) == '"', engine_folders)
                if why:
                    problems.append(f"{rel}:{n}: {m.group(2)}: {why}")
    return problems


def self_test():
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        root = pathlib.Path(tmp)
        files = {
            "engine/src/comm/a.cpp": '#include "ringmaster/agent/events.h"\n#include <QString>\n#include "base/log.h"\n',
            "agent/server/b.cpp": '#include "comm/channel.h"\n#include <QObject>\n#include "ringmaster/comm.h"\n',
            "ui/models/c.cpp": '#include "ringmaster/agent/server.h"\n#include "ringmaster/agent/events.h"\n#include <QWidget>\n'
            '#include "ringmaster/comm.h"\n#include "ringmaster/status.h"\n',
            "app/d.cpp": '#include "tune/cache.h"\n#include "ringmaster/tools/tuner.h"\n',
        }
        for name, text in files.items():
            (root / name).parent.mkdir(parents=True, exist_ok=True)
            (root / name).write_text(text)
        found = check(root, {"comm", "base", "tune"})
        expected = [
            "agent/server/b.cpp:1: comm/channel.h",
            "agent/server/b.cpp:2: QObject",
            "app/d.cpp:1: tune/cache.h",
            "engine/src/comm/a.cpp:1: ringmaster/agent/events.h",
            "engine/src/comm/a.cpp:2: QString",
            "ui/models/c.cpp:1: ringmaster/agent/server.h",
            "ui/models/c.cpp:4: ringmaster/comm.h",
        ]
        got = sorted(p.split(": ", 2)[0] + ": " + p.split(": ", 2)[1] for p in found)
        assert got == expected, got
    print("self-test passed")


def main():
    if "--self-test" in sys.argv:
        self_test()
    root = pathlib.Path(sys.argv[1])
    engine_folders = {p.name for p in (root / "engine/src").iterdir() if p.is_dir()}
    problems = check(root, engine_folders)
    for p in problems:
        print("FAIL: " + p)
    print(f"{len(problems)} include(s) across the modules' layers")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
