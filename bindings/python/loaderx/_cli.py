"""The `zr` command of a pip-installed loaderx.

A wheel carries the native `zr` tool inside the package (loaderx/zr, next
to this file), linked against the libraries the wheel bundles; the console
script `zr` that pip puts on the environment's PATH runs it with the
arguments it was given. A meson install under a prefix puts the tool in
<prefix>/bin instead and does not use this module.
"""

import os
import sys


def main():
    tool = os.path.join(os.path.dirname(os.path.abspath(__file__)), "zr")
    if not os.access(tool, os.X_OK):
        sys.stderr.write("zr: the native tool %s is missing; this loaderx was not installed "
                         "from its wheel (a prefix install puts zr in <prefix>/bin)\n" % tool)
        return 127
    os.execv(tool, [tool] + sys.argv[1:])


if __name__ == "__main__":
    sys.exit(main())
