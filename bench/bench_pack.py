#!/usr/bin/env python3
"""Sequence packing on the real token corpus: padding of each policy, and
packed tokens per second against Grain's packing and a plain numpy
first-fit, side by side in one run.

The corpus is bench/prepare.py's GPT-2 BPE tokens of linux-doc-6.1, taken
two ways: as its paragraphs (the ragged records the other benchmarks use;
median 30 tokens) and as whole files (each file's paragraphs back to back;
median 710 tokens, 40% of them longer than 1024). Each becomes a raw
RaggedStore of int32 documents.

Padding: one finite pass (every document once, shuffled, seed 0) of the
loader's pack mode per corpus, row length (1024, 2048) and policy; the
padding fraction is 1 - real tokens / (rows * L). Documents longer than a
row are split (the default).

Throughput: the same documents for every contender (the first
`tp_docs` documents of the paragraph corpus, split into pieces of at most
L tokens beforehand for the peers, which need documents that fit a row),
rows of L = 1024 in batches of 8 rows, each contender delivering every
batch as arrays of tokens, segment ids and positions:
  loaderx   the loader's pack mode, one pass per round, all CPUs;
  grain     grain.experimental.FirstFitPackIterDataset / BestFitPackIterDataset
            (num_packing_bins = 8) over an in-memory MapDataset of the
            pieces, then .batch(8), in this process;
  numpy     a first-fit over 8 open rows (as Grain's: when a piece fits none,
            the rows are emitted), writing the rows with numpy slices.
Every contender's output is checked before timing: its segments, as a
multiset of token strings, are exactly the pieces. The rate is real
(non-padding) tokens per second; rounds alternate between contenders and
each keeps its best.

    python3 bench/bench_pack.py [--quick] [--json FILE]
"""
import argparse
import hashlib
import json
import os
import shutil
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import prepare  # noqa: E402

FULL = {"lengths": (1024, 2048), "tp_length": 1024, "batch": 8, "tp_docs": 20000,
        "rounds": 3, "grain_docs": 20000, "corpora": ("paragraphs", "files")}
QUICK = {"lengths": (128,), "tp_length": 128, "batch": 4, "tp_docs": 300, "rounds": 1,
         "grain_docs": 300, "corpora": ("paragraphs",)}
POLICIES = ("first_fit", "best_fit", "concat")


# ------------------------------------------------------------------ corpus

def corpus(name, quick):
    """(tokens int32, starts, lengths) of the corpus's documents."""
    tokens, lengths = prepare.load()
    if name == "paragraphs":
        starts = np.concatenate([[0], np.cumsum(lengths)[:-1]])
    else:
        starts, lengths = prepare.load_files()
    if quick:  # a few thousand documents, as they come
        starts, lengths = starts[:3000], lengths[:3000]
    return tokens, starts, lengths


def write_store(path, tokens, starts, lengths):
    from loaderx.zrecord import RaggedStore
    with RaggedStore.create(path, dtype="int32", codec="raw") as s:
        step = 4096
        for a in range(0, len(lengths), step):
            s.append([np.asarray(tokens[o:o + n]) for o, n in
                      zip(starts[a:a + step].tolist(), lengths[a:a + step].tolist())])
    return RaggedStore.open(path, readonly=True)


def pieces_of(tokens, starts, lengths, L):
    """Each document cut into pieces of at most L tokens (the split rule)."""
    out = []
    for o, n in zip(starts.tolist(), lengths.tolist()):
        doc = np.asarray(tokens[o:o + n])
        out.extend(doc[a:a + L] for a in range(0, n, L))
    return out


def digest(a):
    return hashlib.blake2b(np.ascontiguousarray(a, dtype=np.int32).tobytes(),
                           digest_size=12).digest()


# ---------------------------------------------------------------- padding

def pass_padding(store, L, policy, batch):
    """(padding fraction, rows, seconds) of one shuffled pass."""
    from loaderx.dataloader import PassLoader
    real = rows = 0
    t = time.perf_counter()
    with PassLoader({"tokens": store}, batch_size=batch, shuffle=True, seed=0,
                    pack_length=L, pack_policy=policy) as p:
        for b in p:
            seg = b["segment_ids"]
            real += int((seg > 0).sum())
            rows += seg.shape[0]
    return 1.0 - real / (rows * L), rows, time.perf_counter() - t


def window_bound(lengths, L, window=1024, seed=0):
    """The least padding any packer that packs windows of `window`
    documents on their own can reach (split rule): per window, its full
    rows plus ceil(the rest's tokens / L). Over a random order of the
    documents (numpy's; the loader's own order is another, of the same
    law)."""
    order = np.random.default_rng(seed).permutation(lengths.size)
    n = lengths[order].astype(np.int64)
    full, rest = n // L, n % L
    rows = 0
    for a in range(0, n.size, window):
        rows += int(full[a:a + window].sum()) + -(-int(rest[a:a + window].sum()) // L)
    return 1.0 - int(n.sum()) / (rows * L)


# --------------------------------------------------------------- contenders

def segments_of(tokens, seg):
    """Every segment of a [rows, L] batch as a token array."""
    out = []
    for r in range(seg.shape[0]):
        row, s = tokens[r], seg[r]
        for k in range(1, int(s.max(initial=0)) + 1):
            out.append(row[s == k])
    return out


def run_loaderx(store, L, policy, batch, sink):
    from loaderx.dataloader import PassLoader
    with PassLoader({"tokens": store}, batch_size=batch, shuffle=True, seed=0,
                    pack_length=L, pack_policy=policy) as p:
        for b in p:
            sink(b["tokens"], b["segment_ids"], b["positions"])


def run_grain(pieces, L, policy, batch, sink):
    import grain.experimental as ge
    import grain.python as gp
    cls = ge.FirstFitPackIterDataset if policy == "first_fit" else ge.BestFitPackIterDataset
    ds = gp.MapDataset.source([{"tokens": p} for p in pieces]).to_iter_dataset()
    ds = cls(ds, length_struct={"tokens": L}, num_packing_bins=batch, seed=0).batch(batch)
    for b in ds:
        sink(b["tokens"], b["tokens_segment_ids"], b["tokens_positions"])


def run_numpy(pieces, L, policy, batch, sink):
    """First fit over `batch` open rows, emitted all at once when a piece
    fits none of them (and at the end)."""
    dtype = pieces[0].dtype
    tok = np.zeros((batch, L), dtype=dtype)
    seg = np.zeros((batch, L), dtype=np.int32)
    pos = np.zeros((batch, L), dtype=np.int32)
    room = np.full(batch, L, dtype=np.int64)
    count = np.zeros(batch, dtype=np.int32)
    ar = np.arange(L, dtype=np.int32)
    for p in pieces:
        n = p.shape[0]
        fit = np.flatnonzero(room >= n)
        if fit.size == 0:
            sink(tok, seg, pos)
            tok, seg, pos = np.zeros_like(tok), np.zeros_like(seg), np.zeros_like(pos)
            room[:] = L
            count[:] = 0
            fit = np.zeros(1, dtype=np.int64)
        i = fit[0]
        at = L - room[i]
        tok[i, at:at + n] = p
        count[i] += 1
        seg[i, at:at + n] = count[i]
        pos[i, at:at + n] = ar[:n]
        room[i] -= n
    if count.any():
        sink(tok, seg, pos)


def validate(name, run, pieces, L):
    """Run one pass collecting every segment; they must be the pieces."""
    got, rows = [], [0]

    def sink(tok, seg, pos):
        assert tok.shape[1] == L and seg.shape == tok.shape and pos.shape == tok.shape, name
        for s in segments_of(tok, seg):
            got.append(digest(s))
        rows[0] += tok.shape[0]

    run(sink)
    want = sorted(digest(p) for p in pieces)
    if sorted(got) != want:
        raise AssertionError(f"{name}: its segments are not the documents' pieces "
                             f"({len(got)} segments, {len(want)} pieces)")


def validate_concat(name, run, pieces, L):
    """Concatenate-and-chunk: every row full but the last, and the rows'
    tokens are the pieces' tokens (as a multiset)."""
    counts, rows, short = {}, [0], [0]

    def sink(tok, seg, pos):
        for r in range(seg.shape[0]):
            n = int(np.count_nonzero(seg[r]))
            short[0] += n < L
            v, c = np.unique(tok[r][seg[r] > 0], return_counts=True)
            for a, b in zip(v.tolist(), c.tolist()):
                counts[a] = counts.get(a, 0) + b
        rows[0] += seg.shape[0]

    run(sink)
    v, c = np.unique(np.concatenate(pieces), return_counts=True)
    if short[0] > 1 or counts != dict(zip(v.tolist(), c.tolist())):
        raise AssertionError(f"{name}: its rows are not the documents' tokens cut every {L}")


def timed(run):
    """(seconds, real tokens, rows) of one pass that only touches the batches."""
    real, rows = [0], [0]

    def sink(tok, seg, pos):
        real[0] += int(np.count_nonzero(seg))
        rows[0] += seg.shape[0]

    t = time.perf_counter()
    run(sink)
    return time.perf_counter() - t, real[0], rows[0]


# ------------------------------------------------------------------ measure

def measure(quick=False, workdir=None, log=print, grain=True):
    cfg = QUICK if quick else FULL
    own = workdir is None
    workdir = workdir or tempfile.mkdtemp(prefix="bench-pack-")
    res = {"config": dict(cfg), "padding": [], "throughput": []}
    try:
        stores = {}
        for name in cfg["corpora"]:
            tokens, starts, lengths = corpus(name, quick)
            stores[name] = write_store(os.path.join(workdir, name), tokens, starts, lengths)
            res.setdefault("corpora", {})[name] = {
                "documents": int(lengths.size), "tokens": int(lengths.sum()),
                "median": float(np.median(lengths)),
                "over": {str(L): float((lengths > L).mean()) for L in cfg["lengths"]}}
        for name, store in stores.items():
            _t, _s, lens = corpus(name, quick)
            for L in cfg["lengths"]:
                row = {"corpus": name, "length": L, "bound": window_bound(lens, L)}
                for policy in POLICIES:
                    pad, rows, sec = pass_padding(store, L, policy, cfg["batch"])
                    row[policy] = pad
                    row[policy + "_rows"] = rows
                row["ratio"] = (row["best_fit"] / row["first_fit"]) if row["first_fit"] else None
                log(f"padding {name} L={L}: " + ", ".join(f"{p} {row[p]:.3%}" for p in POLICIES))
                res["padding"].append(row)
        # Throughput: the same documents for everyone.
        L, B = cfg["tp_length"], cfg["batch"]
        tokens, starts, lengths = corpus("paragraphs", quick)
        n = min(cfg["tp_docs"], lengths.size)
        starts, lengths = starts[:n], lengths[:n]
        store = write_store(os.path.join(workdir, "tp"), tokens, starts, lengths)
        pieces = pieces_of(tokens, starts, lengths, L)
        contenders = []
        for policy in ("first_fit", "best_fit"):
            contenders.append((f"loaderx {policy}", policy,
                               lambda sink, p=policy: run_loaderx(store, L, p, B, sink)))
            if grain:
                contenders.append((f"grain {policy}", policy,
                                   lambda sink, p=policy: run_grain(pieces, L, p, B, sink)))
        contenders.append(("loaderx concat", "concat",
                           lambda sink: run_loaderx(store, L, "concat", B, sink)))
        contenders.append(("numpy first_fit", "first_fit",
                           lambda sink: run_numpy(pieces, L, "first_fit", B, sink)))
        for name, _policy, run in contenders:
            if name.endswith("concat"):  # its segments are cut at row ends, not at L
                validate_concat(name, run, pieces, L)
            else:
                validate(name, run, pieces, L)
        best = {name: None for name, _, _ in contenders}
        for _ in range(cfg["rounds"]):
            for name, policy, run in contenders:
                sec, real, rows = timed(run)
                rate = real / sec
                if best[name] is None or rate > best[name]["tokens_s"]:
                    best[name] = {"name": name, "policy": policy, "tokens_s": rate,
                                  "seconds": sec, "padding": 1.0 - real / (rows * L),
                                  "rows": rows}
        for name, _, _ in contenders:
            r = best[name]
            log(f"throughput {name}: {r['tokens_s'] / 1e6:.2f} M tokens/s, "
                f"padding {r['padding']:.2%}")
            res["throughput"].append(r)
        res["tp"] = {"documents": int(n), "pieces": len(pieces), "tokens": int(lengths.sum()),
                     "length": L, "batch": B, "cpus": os.cpu_count()}
        for s in list(stores.values()) + [store]:
            s.close()
    finally:
        if own:
            shutil.rmtree(workdir, ignore_errors=True)
    return res


def ratios(res):
    """loaderx against each peer, policy by policy: {label: ratio}."""
    tp = {r["name"]: r["tokens_s"] for r in res.get("throughput", [])}
    out = {}
    for policy in ("first_fit", "best_fit"):
        ours = tp.get(f"loaderx {policy}")
        if ours and tp.get(f"grain {policy}"):
            out[f"loaderx / grain, {policy}"] = ours / tp[f"grain {policy}"]
    if tp.get("loaderx first_fit") and tp.get("numpy first_fit"):
        out["loaderx / numpy, first_fit"] = tp["loaderx first_fit"] / tp["numpy first_fit"]
    return out


def markdown(res):
    """The report's section (lines of Markdown)."""
    w = []
    cor = res.get("corpora", {})
    w.append("Padding: the share of the rows' tokens that are padding, one shuffled pass "
             "of the loader's pack mode (every document once; longer ones split; windows of "
             f"1024 documents), batches of {res['config']['batch']} rows. Window bound: the "
             "least padding of any packer that packs each window of 1024 documents on its own "
             "(full rows plus the rest's tokens rounded up to whole rows, per window; numpy's "
             "random order).")
    w.append("")
    w.append("| documents | L | first_fit | best_fit | concat | best_fit / first_fit | "
             "window bound |")
    w.append("|---|---:|---:|---:|---:|---:|---:|")
    for r in res["padding"]:
        c = cor.get(r["corpus"], {})
        label = (f"{r['corpus']} ({c.get('documents', 0):,}, median {c.get('median', 0):.0f} "
                 f"tokens, {c.get('over', {}).get(str(r['length']), 0):.1%} over L)")
        ratio = f"{r['ratio']:.2f}x" if r["ratio"] is not None else "n/a"
        w.append(f"| {label} | {r['length']} | {r['first_fit']:.3%} | {r['best_fit']:.3%} | "
                 f"{r['concat']:.3%} | {ratio} | {r['bound']:.3%} |")
    w.append("")
    tp = res.get("tp")
    if tp:
        w.append(f"Throughput: the first {tp['documents']:,} paragraphs ({tp['tokens']:,} "
                 f"tokens, {tp['pieces']:,} pieces of at most {tp['length']}), rows of "
                 f"{tp['length']} in batches of {tp['batch']}, {tp['cpus']} CPUs; real tokens "
                 "per second, each contender's best of alternating rounds, every output "
                 "checked first.")
        w.append("")
        w.append("| contender | M tokens/s | padding |")
        w.append("|---|---:|---:|")
        for r in res["throughput"]:
            w.append(f"| {r['name']} | {r['tokens_s'] / 1e6:.2f} | {r['padding']:.2%} |")
        w.append("")
        for k, v in ratios(res).items():
            w.append(f"- {k}: {v:.1f}x")
        w.append("")
    return w


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--no-grain", action="store_true", help="leave Grain out")
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    r = measure(quick=args.quick, log=lambda m: print(m, file=sys.stderr, flush=True),
                grain=not args.no_grain)
    print("\n".join(markdown(r)))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(r, f, indent=1)
