#!/usr/bin/env python3
"""Prepare the real-token corpus for the benchmarks (never timed).

Reads the text of Debian's ``linux-doc-6.1`` (``/usr/share/doc/linux-doc-6.1``,
the .rst/.txt files), splits it into paragraphs (blank-line separated: the
"text boundaries" the ragged workload keeps) and tokenizes each paragraph
once with GPT-2's BPE through the npm package ``gpt-3-encoder`` (installed
on first use into the cache directory with ``npm install``). The result is
cached outside the repository:

    $LOADERX_BENCH_CACHE (default ~/.cache/loaderx/bench)/corpus-v1/
        tokens.npy   int32, every token of every paragraph, in order
        lengths.npy  int64, tokens per paragraph
        files.npy    int64, paragraphs per file (load_files: documents as
                     whole files, made on first use)

    python3 bench/prepare.py [--force]
"""
import argparse
import gzip
import os
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import numpy as np

DOC_ROOT = "/usr/share/doc/linux-doc-6.1/Documentation"
NPM_PACKAGE = "gpt-3-encoder@1.1.4"
HERE = os.path.dirname(os.path.abspath(__file__))


def cache_dir():
    return os.environ.get("LOADERX_BENCH_CACHE",
                          os.path.join(os.path.expanduser("~"), ".cache", "loaderx", "bench"))


def corpus_dir():
    return os.path.join(cache_dir(), "corpus-v1")


def ensure_encoder():
    """Install gpt-3-encoder into the cache directory (once); returns NODE_PATH."""
    base = cache_dir()
    mods = os.path.join(base, "node_modules")
    if not os.path.isdir(os.path.join(mods, "gpt-3-encoder")):
        os.makedirs(base, exist_ok=True)
        print(f"prepare: npm install {NPM_PACKAGE} into {base}", file=sys.stderr)
        subprocess.run(["npm", "install", "--no-audit", "--no-fund", "--silent",
                        "--prefix", base, NPM_PACKAGE], check=True)
    return mods


def paragraphs(per_file=None):
    """Every paragraph of the corpus, file after file (sorted paths); with a
    list `per_file`, also appends each file's paragraph count to it."""
    if not os.path.isdir(DOC_ROOT):
        raise SystemExit(f"prepare: {DOC_ROOT} is missing; install the Debian package "
                         "linux-doc-6.1 (scripts/setup.sh does)")
    files = []
    for root, _dirs, names in os.walk(DOC_ROOT):
        for n in names:
            if n.endswith((".rst.gz", ".txt.gz")):
                files.append(os.path.join(root, n))
    files.sort()
    out = []
    for f in files:
        with gzip.open(f, "rt", encoding="utf-8", errors="replace") as fh:
            text = fh.read().replace("\0", "")
        before = len(out)
        for p in re.split(r"\n[ \t]*\n", text):
            p = p.strip("\n")
            if p.strip():
                out.append(p)
        if per_file is not None:
            per_file.append(len(out) - before)
    return out


def tokenize(paras, node_path, jobs=2):
    """Token ids per paragraph (a list of int32 arrays), `jobs` node processes."""
    env = dict(os.environ, NODE_PATH=node_path)
    n = len(paras)
    step = (n + 4 * jobs - 1) // (4 * jobs)
    slices = [paras[i:i + step] for i in range(0, n, step)]

    def run(texts):
        data = "\0".join(texts).encode("utf-8")
        r = subprocess.run(["node", os.path.join(HERE, "tokenize.js")], input=data,
                           stdout=subprocess.PIPE, env=env, check=True)
        words = np.frombuffer(r.stdout, dtype="<u4")
        res, pos = [], 0
        while pos < words.size:
            k = int(words[pos])
            res.append(words[pos + 1:pos + 1 + k].astype(np.int32))
            pos += 1 + k
        if len(res) != len(texts):
            raise RuntimeError(f"tokenizer returned {len(res)} texts for {len(texts)}")
        return res

    with ThreadPoolExecutor(jobs) as ex:
        out = []
        for part in ex.map(run, slices):
            out.extend(part)
    return out


def load():
    """(tokens int32, lengths int64) from the cache; prepares them if missing."""
    d = corpus_dir()
    tok, lens = os.path.join(d, "tokens.npy"), os.path.join(d, "lengths.npy")
    if not (os.path.exists(tok) and os.path.exists(lens)):
        prepare()
    return np.load(tok, mmap_mode="r"), np.load(lens)


def load_files():
    """The corpus's documents as whole files: (starts, lengths), int64 token
    offsets into tokens.npy and token counts of the files (each file's
    paragraphs back to back, in order; files without a paragraph left out). The paragraph count of each file comes from
    the same walk of the documentation as the tokens (no tokenizing),
    cached beside them as files.npy."""
    _tokens, lengths = load()
    path = os.path.join(corpus_dir(), "files.npy")
    if not os.path.exists(path):
        counts = []
        paragraphs(counts)
        counts = np.array(counts, dtype=np.int64)
        if counts.sum() != lengths.size:
            raise RuntimeError(f"prepare: the documentation has {counts.sum()} paragraphs now, the "
                               f"cached tokens {lengths.size}; run prepare.py --force")
        np.save(path + ".tmp.npy", counts)
        os.replace(path + ".tmp.npy", path)
    counts = np.load(path)
    ends = np.cumsum(counts)
    at = np.concatenate([[0], np.cumsum(lengths)])
    starts, per_file = at[ends - counts], at[ends] - at[ends - counts]
    return starts[counts > 0], per_file[counts > 0]


def prepare(force=False):
    d = corpus_dir()
    if not force and os.path.exists(os.path.join(d, "lengths.npy")):
        return
    node_path = ensure_encoder()
    paras = paragraphs()
    print(f"prepare: tokenizing {len(paras)} paragraphs of linux-doc-6.1 "
          f"(GPT-2 BPE, once)", file=sys.stderr)
    ids = tokenize(paras, node_path, jobs=os.cpu_count() or 2)
    lengths = np.array([a.size for a in ids], dtype=np.int64)
    tokens = np.concatenate(ids).astype(np.int32)
    os.makedirs(d, exist_ok=True)
    np.save(os.path.join(d, "tokens.npy.tmp.npy"), tokens)
    np.save(os.path.join(d, "lengths.npy.tmp.npy"), lengths)
    os.replace(os.path.join(d, "tokens.npy.tmp.npy"), os.path.join(d, "tokens.npy"))
    os.replace(os.path.join(d, "lengths.npy.tmp.npy"), os.path.join(d, "lengths.npy"))
    print(f"prepare: {tokens.size} tokens in {lengths.size} paragraphs -> {d}", file=sys.stderr)


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--force", action="store_true", help="tokenize again")
    prepare(ap.parse_args().force)
