#!/usr/bin/env python3
"""No layer above the format drivers knows a driver by its name.

A driver says what it is and can do through its tc_format_cap bits
(formats/format.h); its name is for messages.  This test reads the names of
the registry's drivers from formats/ (tc_formats[] in registry.c and each
table's initializer) and fails when, in src/ (operations, command line,
model, base):
  - a string literal is a driver's name (behaviour chosen by comparing it),
  - tc_format_named, a lookup by name, is called or declared anywhere,
  - a driver's write is called through the table (->write) instead of
    tc_format_write, which fails cleanly when no driver has the trait,
  - tc_ckpt_format's result is compared (strcmp, strncmp, ==).

usage: driver_names.py SOURCE_ROOT
"""
import pathlib
import re
import sys

# Literals equal to a driver's name that are not one, each with why.
ALLOWED = {
    ("src/cli/common.c", "safetensors"): "--format's choice: the user's word for the output, not a driver",
    ("src/cli/common.c", "gguf"): "--format's choice, which names the extension of a file written into a folder",
    ("src/ops/set.c", "safetensors"): "a message naming the kind of output asked for",
    ("src/cli/cmd_convert.c", "gguf"): "--format's choice: the user's word for the output, not a driver",
    ("src/cli/cmd_inspect.c", "gguf"): "the name of inspect --json's GGUF section, a key of its output",
}


def strip_comments(text):
    """C text with its comments blanked (string literals kept)."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if c == '"' or c == "'":
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == "\\" else 1
            out.append(text[i:j + 1])
            i = j + 1
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            i = j
        else:
            out.append(c)
            i += 1
    return "".join(out)


def driver_names(root):
    reg = (root / "formats" / "registry.c").read_text()
    table = re.search(r"tc_formats\[\]\s*=\s*\{(.*?)\};", reg, re.S)
    if not table:
        raise SystemExit("driver_names: no tc_formats[] in formats/registry.c")
    tables = re.findall(r"&(tc_format_\w+)", strip_comments(table.group(1)))
    names = {}
    for f in sorted((root / "formats").glob("*.c")):
        # each table's initializer, its name first ("name", or .name = "name")
        table_re = r"const tc_format (tc_format_\w+)\s*=\s*\{\s*(?:\.name\s*=\s*)?\"([^\"]+)\""
        for t, name in re.findall(table_re, f.read_text()):
            names[t] = name
    missing = [t for t in tables if t not in names]
    if missing or len(tables) < 5:
        raise SystemExit(f"driver_names: cannot read the names of {missing or tables}")
    return {names[t] for t in tables}


def main():
    root = pathlib.Path(sys.argv[1])
    names = driver_names(root)
    # the checks must catch what they are for
    probe = strip_comments('/* "torch-zip" */ x = !strcmp(tc_ckpt_format(c), "torch-zip");')
    if re.findall(r'"((?:[^"\\]|\\.)*)"', probe) != ["torch-zip"]:
        print("driver_names: the literal reader misses a name", file=sys.stderr)
        return 1
    cmp_format = re.compile(r"str(?:n)?cmp\s*\(\s*tc_ckpt_format\s*\(|tc_ckpt_format\s*\([^)]*\)\s*[=!]=")
    bad = 0
    files = sorted(p for p in (root / "src").rglob("*") if p.suffix in (".c", ".h"))
    files += sorted(p for p in (root / "formats").rglob("*") if p.suffix in (".c", ".h"))
    for p in files:
        rel = p.relative_to(root).as_posix()
        text = strip_comments(p.read_text())
        above = rel.startswith("src/")
        for no, line in enumerate(text.splitlines(), 1):
            where = f"{rel}:{no}: {line.strip()}"
            if re.search(r"\btc_format_named\b", line):
                print(f"{where}\n  a driver looked up by name: ask for a trait (tc_format_writer, tc_ckpt_can)",
                      file=sys.stderr)
                bad = 1
            if rel != "formats/registry.c" and cmp_format.search(line):
                print(f"{where}\n  a driver's name compared: ask tc_ckpt_can for a trait", file=sys.stderr)
                bad = 1
            if not above:
                continue
            if re.search(r"->\s*write\s*\(", line) and "tc_format" in text:
                print(f"{where}\n  a driver's writer called through its table: tc_format_write", file=sys.stderr)
                bad = 1
            for lit in re.findall(r'"((?:[^"\\]|\\.)*)"', line):
                if lit in names and (rel, lit) not in ALLOWED:
                    print(f"{where}\n  the driver name \"{lit}\" above formats/: ask for a trait "
                          "(tc_format_cap in formats/format.h)", file=sys.stderr)
                    bad = 1
    if not bad:
        print(f"driver_names: {len(files)} files, {len(names)} driver names: none above formats/")
    return bad


if __name__ == "__main__":
    sys.exit(main())
