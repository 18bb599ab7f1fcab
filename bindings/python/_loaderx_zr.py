"""The `zr` command of a pip-installed loaderx.

A wheel carries the native `zr` tool inside the package (loaderx/zr, or
loaderx/zr.exe on Windows),
linked against the libraries the wheel bundles. The console script `zr`
that pip puts on the environment's PATH calls main() here, which replaces
the Python process with that tool (same pid, same arguments).

This is a top-level module, not part of the loaderx package, on purpose:
importing anything under loaderx runs loaderx/__init__.py, which loads
numpy and the extension module (a few hundred milliseconds). Here the only
import is importlib.util, and the package directory is found without
importing it, so `zr` starts in about the time of a bare interpreter and a
Ctrl-C in that window ends it with status 130, as the native tool's own
interrupt does, instead of a traceback and status 1.

`zr mrec import` runs the ASE-based importer of this package in Python:
the tool takes the interpreter from $ZR_PYTHON, which main() sets to the
interpreter running it (unless the caller set it), so `.venv/bin/zr mrec
import` works by absolute path without the venv on PATH.

A meson install under a prefix puts the native tool in <prefix>/bin and
does not use this module.
"""

import os
import sys


def _tool():
    import importlib.util
    spec = importlib.util.find_spec("loaderx")  # locates, does not import
    if spec is None or not spec.submodule_search_locations:
        return None
    return os.path.join(list(spec.submodule_search_locations)[0], "zr.exe" if os.name == "nt" else "zr")


def main():
    try:
        tool = _tool()
        if tool is None or not os.access(tool, os.X_OK):
            sys.stderr.write("zr: the native tool %s is missing; this loaderx was not installed "
                             "from its wheel (a prefix install puts zr in <prefix>/bin)\n"
                             % (tool or "loaderx/zr"))
            return 127
        # the interpreter of this environment, which has loaderx, for what zr
        # hands to Python (`zr mrec import`, `zr ingest` of Parquet/Arrow
        # files); a caller's own choice stays
        os.environ.setdefault("ZR_PYTHON", sys.executable)
        if os.name == "nt":  # no exec on Windows: run it and pass its status on
            import subprocess
            return subprocess.call([tool] + sys.argv[1:])
        os.execv(tool, [tool] + sys.argv[1:])
    except KeyboardInterrupt:
        return 130
    return 0  # not reached on POSIX: execv does not return


if __name__ == "__main__":
    sys.exit(main())
