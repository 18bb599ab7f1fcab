"""No call cycle between libzrengine's source files: each may call only the
files listed before it in libzrengine/meson.build (zrengine_src), the
layering docs/ARCHITECTURE.md describes. And the layer under every library,
libzrerror: its sources call no other library of the project (and the
platform layer only for its status constants), and no public header
declares or includes the calls of zrerror_sys.h, which are for the
project's own libraries and bindings.

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


SYS_CALLS = ("zr_set_error", "zr_set_errorv", "zr_set_error_errno", "zr_os_strerror",
             "zr_check_path")
OTHER_LIB_CALL = re.compile(r"\b((?:zre|zrs|zsm|zld|zmr|zrp)_\w+)\s*\(")
INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"', re.M)


def error_layer(root):
    """The complaints about libzrerror's place at the bottom."""
    bad = []
    errdir = os.path.join(root, "libzrerror")
    srcdir = os.path.join(errdir, "src")
    if not os.path.isdir(srcdir):
        return ["libzrerror/src is missing"]
    for name in sorted(os.listdir(srcdir)):
        if not name.endswith((".c", ".h")):
            continue
        raw = open(os.path.join(srcdir, name), encoding="utf-8").read()
        for inc in INCLUDE.findall(raw):
            if inc not in ("zrerror.h", "zrerror_sys.h", "zr_platform.h"):
                bad.append(f"libzrerror/src/{name} includes {inc}, a header of a layer above")
        for fn in sorted(set(OTHER_LIB_CALL.findall(strip_comments_and_strings(raw)))):
            bad.append(f"libzrerror/src/{name} calls {fn}, of a layer above")
    for lib in sorted(os.listdir(root)):
        incdir = os.path.join(root, lib, "include")
        if not lib.startswith("lib") or not os.path.isdir(incdir):
            continue
        for name in sorted(os.listdir(incdir)):
            if not name.endswith(".h") or name == "zrerror_sys.h":
                continue
            raw = open(os.path.join(incdir, name), encoding="utf-8").read()
            if "zrerror_sys.h" in INCLUDE.findall(raw):
                bad.append(f"{lib}/include/{name} includes zrerror_sys.h (not for programs)")
            code = strip_comments_and_strings(raw)
            for fn in SYS_CALLS:
                if re.search(r"\b" + fn + r"\s*\(", code):
                    bad.append(f"{lib}/include/{name} declares {fn} (zrerror_sys.h's)")
    return bad


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
    bad += error_layer(os.path.dirname(os.path.abspath(libdir)))
    print("under them all: libzrerror (calls no library above it)")
    for line in bad:
        print("engine_layers:", line)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
