"""Copy LMDB's four sources into OUTDIR and apply a patch series to them.

usage: apply_series.py PATCH OUTDIR lmdb.h mdb.c midl.c midl.h P1.patch P2.patch ...

The patches name their files as a/libraries/liblmdb/<file> (-p3 leaves
<file>); they are applied in the order given, each to the result of the
ones before it. Any patch that does not apply exactly fails the build.
"""
import os
import shutil
import subprocess
import sys


def main(argv):
    patch, outdir, sources, series = argv[1], argv[2], argv[3:7], argv[7:]
    for src in sources:
        shutil.copyfile(src, os.path.join(outdir, os.path.basename(src)))
    for p in series:
        rc = subprocess.call([patch, "-p3", "--batch", "--silent", "--no-backup-if-mismatch",
                              "-r", "-", "-d", outdir, "-i", os.path.abspath(p)])
        if rc != 0:
            sys.stderr.write(f"apply_series: {os.path.basename(p)} does not apply (patch exit {rc})\n")
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
