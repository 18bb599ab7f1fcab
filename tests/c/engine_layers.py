"""No call cycle between libzrengine's source files: each may call only the
files listed before it in libzrengine/meson.build (zrengine_src), the
layering docs/ARCHITECTURE.md describes.

    python3 tests/c/engine_layers.py LIBZRENGINE_DIR

Reads the sources, finds where each non-static function is defined and
which of them every file calls, and fails (exit 1, one line per call)
when a file calls one defined in a file listed after it, or in itself
through another file. Prints the layering it checked.
"""

import os
import re
import sys


def source_order(libdir):
    text = open(os.path.join(libdir, "meson.build"), encoding="utf-8").read()
    m = re.search(r"zrengine_src\s*=\s*files\((.*?)\)", text, re.S)
    if not m:
        sys.exit("engine_layers: no zrengine_src = files(...) in meson.build")
    return [os.path.basename(p) for p in re.findall(r"'src/([^']+\.c)'", m.group(1))]


def strip_comments_and_strings(src):
    src = re.sub(r"/\*.*?\*/", " ", src, flags=re.S)
    src = re.sub(r"//[^\n]*", " ", src)
    return re.sub(r'"(\\.|[^"\\])*"', '""', src)


DEFINITION = re.compile(r"^(?!static\b)[A-Za-z_][\w \t\*]*?\b(\w+)\s*\([^;{]*\)\s*\{", re.M)
CALL = re.compile(r"\b(zre?_\w+|zr_\w+)\s*\(")


def main():
    libdir = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__),
                                                                  "..", "..", "libzrengine")
    order = source_order(libdir)
    bodies, defined_in = {}, {}
    for name in order:
        src = strip_comments_and_strings(
            open(os.path.join(libdir, "src", name), encoding="utf-8").read())
        bodies[name] = src
        for fn in DEFINITION.findall(src):
            defined_in[fn] = name
    bad = []
    for rank, name in enumerate(order):
        for fn in sorted(set(CALL.findall(bodies[name]))):
            home = defined_in.get(fn)
            if home and home != name and order.index(home) > rank:
                bad.append(f"{name} calls {fn}, defined in {home}, which comes after it")
    print("engine layers:", " -> ".join(order))
    for line in bad:
        print("engine_layers:", line)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
