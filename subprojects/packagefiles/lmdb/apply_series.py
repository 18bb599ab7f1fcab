"""Copy LMDB's four sources into OUTDIR and apply a patch series to them.

usage: apply_series.py PATCH OUTDIR lmdb.h mdb.c midl.c midl.h P1.patch P2.patch ...

The patches name their files as a/libraries/liblmdb/<file> (-p3 leaves
<file>); they are applied in the order given, each to the result of the
ones before it. Any patch that does not apply exactly fails the build.

Then one rule of loaderx's own: the cursor moves (mdb_cursor_next,
mdb_cursor_set, mdb_cursor_first, mdb_cursor_last) only *assert* that the
page they land on is a leaf. With assertions compiled out (NDEBUG, every
build here) a damaged sibling or child page number leads them to read a
non-leaf page's node offsets as a leaf's and past the map (SIGSEGV, found by
fuzz_mrec_lmdb). Each such assertion becomes the check mdb_cursor_prev
already makes: not a leaf -> MDB_CORRUPTED, the transaction marked failed.
The count of places is pinned, so a new LMDB that moves them fails the
build instead of going unchecked.

And a second: LMDB never bounds a node's offset, key or inline data within
its page, so a damaged node offset on a branch or leaf page sends the key
search (mdb_node_search) past the end of the map (SIGSEGV, found by
fuzz_mrec_lmdb on a file's last pages). mdb_page_get, which every page read
from the map passes, already checks the page's lower and upper bounds; it
now also checks each node of a page read from the file (not the pages a
write transaction builds itself): the offset lies in the node area, and the
node's header and key end inside the page (an inline value's end is checked
where it is read, by the series' validate-node-read-size). Otherwise
MDB_CORRUPTED, the transaction marked failed. Cost: one loop over the
page's keys per page read, within run-to-run noise of a frame read through
libzmrec (16.3-18.3 us per frame without it, 16.7-17.4 with it).
"""
import os
import re
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
    mdb = os.path.join(outdir, "mdb.c")
    with open(mdb) as f:
        text = f.read()
    leaf_assert = re.compile(r"mdb_cassert\(mc, IS_LEAF\(((?:[^()]|\([^()]*\))*)\)\);")
    text, n = leaf_assert.subn(r"if (!IS_LEAF(\1)) { mc->mc_txn->mt_flags |= MDB_TXN_ERROR; return MDB_CORRUPTED; }",
                               text)
    if n != LEAF_ASSERTS:
        sys.stderr.write(f"apply_series: {n} leaf assertions in mdb.c, expected {LEAF_ASSERTS}\n")
        return 1
    if text.count(PAGE_GET_ANCHOR) != 1:
        sys.stderr.write("apply_series: mdb_page_get's bounds check moved; node check not placed\n")
        return 1
    text = text.replace(PAGE_GET_ANCHOR, NODE_CHECK + PAGE_GET_ANCHOR)
    with open(mdb, "w") as f:
        f.write(text)
    return 0


#: mdb_cursor_next, mdb_cursor_set (2), mdb_cursor_first, mdb_cursor_last
LEAF_ASSERTS = 5

#: The end of mdb_page_get's page checks: the node check goes just before it.
PAGE_GET_ANCHOR = "\n\t*ret = p;\n\tif (lvl)\n"

NODE_CHECK = r"""
	if ((MP_FLAGS(p) & (P_BRANCH|P_LEAF)) && !(MP_FLAGS(p) & (P_LEAF2|P_DIRTY))) {
		size_t psize = env->me_psize, upper = (size_t)MP_UPPER(p) + PAGEBASE;
		unsigned nkeys = NUMKEYS(p), k;
		for (k = 0; k < nkeys; k++) {
			size_t off = (size_t)MP_PTRS(p)[k] + PAGEBASE, end = off + NODESIZE;
			if (off >= upper && end <= psize) {
				end += NODEKSZ((MDB_node *)((char *)p + off));
			}
			if (off < upper || end > psize) {
				txn->mt_flags |= MDB_TXN_ERROR;
				return MDB_CORRUPTED;
			}
		}
	}
"""


if __name__ == "__main__":
    sys.exit(main(sys.argv))
