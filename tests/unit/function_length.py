#!/usr/bin/env python3
"""Functions a reader can hold in mind (issue: no function over ~120 lines
without a written reason at its top).

Scans the project's C++ (engine, agent, app, ui) for function definitions
at namespace level (clang-format puts their first line and their closing
brace at column 0) and measures each from its signature to its closing
brace. Then:

- a function longer than REASON_FROM lines needs a reason in the comment
  just above it, on a line starting "// Long:" (why it stays whole);
- every function longer than LISTED_FROM lines is listed and must be in
  tests/unit/long_functions.txt with at least its length, reason or not.

The record holds what was there when the rule came (those over
LISTED_FROM, and those over REASON_FROM without a reason): a function not
in it that breaks a rule fails, and so does a recorded one that grew; one
that shrank or left is reported, so the record can follow (--update).

Usage: function_length.py ROOT [--update] [--self-test]
(--update rewrites the record; --self-test first checks the rules on a made-up tree)
"""
import pathlib
import re
import sys

REASON_FROM = 120
LISTED_FROM = 150
FOLDERS = ("engine", "agent", "app", "ui")
NOT_FUNCTIONS = re.compile(r"^(namespace|class|struct|enum|union|extern|template\s*<[^>]*>\s*(class|struct)|#|//|/\*|\s)")


def functions(path):
    """(name, first line, length) of each function defined at column 0."""
    lines = path.read_text(encoding="utf-8", errors="replace").split("\n")
    out = []
    i = 0
    while i < len(lines):
        line = lines[i]
        if not line or NOT_FUNCTIONS.match(line) or "(" not in line or line.startswith("}"):
            i += 1
            continue
        # The signature runs until a line that ends with "{" (or a ";": a
        # declaration, or "= default").
        j = i
        while j < len(lines) and not lines[j].rstrip().endswith("{") and not lines[j].rstrip().endswith(";"):
            j += 1
            if j - i > 12:
                break
        if j >= len(lines) or not lines[j].rstrip().endswith("{") or j - i > 12:
            i += 1
            continue
        # The body ends at the first "}" at column 0.
        k = j + 1
        while k < len(lines) and not lines[k].startswith("}"):
            k += 1
        if k >= len(lines):
            break
        signature = " ".join(l.strip() for l in lines[i : j + 1])
        name = re.search(r"([~\w:]+(?:operator\S*)?)\s*\(", signature)
        out.append((name.group(1) if name else signature[:40], i, k - i + 1, lines[max(0, i - 12) : i]))
        i = k + 1
    return out


def has_reason(above):
    # The comment block directly above the signature.
    block = []
    for line in reversed(above):
        if not line.startswith("//"):
            break
        block.append(line)
    return any(l.startswith("// Long:") for l in block)


def self_test():
    """The rules catch what they are for, on a tree made up here."""
    import tempfile

    def body(n):
        return "".join(f"  x += {i};\n" for i in range(n - 2))

    with tempfile.TemporaryDirectory() as tmp:
        root = pathlib.Path(tmp)
        (root / "engine").mkdir()
        (root / "tests/unit").mkdir(parents=True)
        (root / "engine/a.cpp").write_text(
            "namespace n {\n\n"
            "int short_one(int x) {\n" + body(20) + "}\n\n"
            "int unexplained(int x) {\n" + body(130) + "}\n\n"
            "// Long: one table, row by row.\n"
            "int explained(int x) {\n" + body(130) + "}\n\n"
            "// Long: even so.\n"
            "int very_long(int x,\n              int y) {\n" + body(160) + "}\n\n"
            "}  // namespace n\n"
        )
        found = {name: length for name, _, length, _ in functions(root / "engine/a.cpp")}
        assert found == {"short_one": 20, "unexplained": 130, "explained": 130, "very_long": 161}, found
        sys.argv = ["", tmp]
        assert main() == 1  # unexplained and very_long are new
        sys.argv = ["", tmp, "--update"]
        assert main() == 0
        record = (root / "tests/unit/long_functions.txt").read_text()
        assert "engine/a.cpp unexplained 130" in record and "engine/a.cpp very_long 161" in record, record
        assert "explained 130" not in record.replace("unexplained", ""), record
        sys.argv = ["", tmp]
        assert main() == 0
        (root / "engine/a.cpp").write_text((root / "engine/a.cpp").read_text().replace("x += 3;", "x += 3;\n  x += 3;"))
        assert main() == 1  # grown
    print("self-test passed")


def main():
    root = pathlib.Path(sys.argv[1])
    update = "--update" in sys.argv
    record_path = root / "tests/unit/long_functions.txt"
    recorded = {}
    if record_path.exists():
        for line in record_path.read_text().splitlines():
            if not line.strip() or line.startswith("#"):
                continue
            where, length = line.rsplit(" ", 1)
            recorded[where] = int(length)
    failures, listed, seen = [], [], set()
    for folder in FOLDERS:
        for path in sorted((root / folder).rglob("*")):
            if path.suffix not in (".cpp", ".h") or "build" in path.parts:
                continue
            rel = path.relative_to(root).as_posix()
            for name, first, length, above in functions(path):
                unexplained = length > REASON_FROM and not has_reason(above)
                if not unexplained and length <= LISTED_FROM:
                    continue
                key = f"{rel} {name}"
                seen.add(key)
                listed.append((length, key))
                was = recorded.get(key)
                at = f"{rel}:{first + 1}: {name} is {length} lines"
                if update:
                    continue
                if was is None and length > LISTED_FROM:
                    failures.append(f"{at}, a new function over {LISTED_FROM}: split it")
                elif was is None:
                    failures.append(f"{at} with no '// Long:' reason above it: split it, or say why it stays whole")
                elif length > was:
                    failures.append(f"{at}, grown from {was}")
                elif length < was:
                    print(f"note: {key} is down from {was} to {length} lines (--update records it)")
    print(f"functions over {LISTED_FROM} lines, or over {REASON_FROM} with no reason ({len(listed)}):")
    for length, key in sorted(listed, reverse=True):
        print(f"  {length:4d} {key}")
    for key in sorted(set(recorded) - seen):
        print(f"note: {key} is off the list now (--update drops it)")
    if update:
        body = "".join(f"{key} {length}\n" for length, key in sorted(listed, key=lambda x: x[1]))
        record_path.write_text(
            f"# Functions over {LISTED_FROM} lines, or over {REASON_FROM} with no '// Long:' reason above them, with\n"
            "# their lengths: tests/unit/function_length.py fails on a function not here that breaks either\n"
            "# rule, and on one here that grew. Splitting them is the way off this list.\n" + body
        )
    for f in failures:
        print("FAIL: " + f)
    return 1 if failures else 0


if __name__ == "__main__":
    if "--self-test" in sys.argv:
        argv = [a for a in sys.argv if a != "--self-test"]
        self_test()
        sys.argv = argv
    sys.exit(main())
