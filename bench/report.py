"""Render the results of bench/run.py: BENCHMARKS.md (machine, limits,
every workload table, sampler, loader, hyperfine, goals) and PNG plots in
img/ beside it."""
import os

MiB = 1 << 20


def _fmt_bytes(n):
    return f"{n / MiB:.1f} MiB" if n >= MiB else f"{n / 1024:.0f} KiB"


def _best_peer(rows, compressed=None):
    peers = [r for r in rows if not r["backend"].startswith("zrecord")
             and (compressed is None or r["compressed"] == compressed)]
    return max(peers, key=lambda r: r["gather_mibs"]) if peers else None


def _row(rows, name):
    return next((r for r in rows if r["backend"] == name), None)


def goals(res):
    """(goal, measured, met) triples."""
    out = []
    mem = res["memcpy"]["all"]
    t = {tb["name"]: tb for tb in res["tables"]}

    def ratio(table, a, b):
        ra, rb = _row(t[table]["rows"], a), _row(t[table]["rows"], b)
        return ra["gather_mibs"] / rb["gather_mibs"] if ra and rb else None

    def add(goal, value, target, fmt="{:.2f}x"):
        if value is not None:
            out.append((goal, fmt.format(value), value >= target))

    if "vision_dense" in t:
        r = _row(t["vision_dense"]["rows"], "zrecord-raw")
        if r:
            add("dense 147 KiB raw gather >= 80% of all-thread memcpy",
                r["gather_mibs"] / mem, 0.80, "{:.0%}")
        add("dense 147 KiB raw gather >= 1.5x numpy memmap",
            ratio("vision_dense", "zrecord-raw", "npy-mmap-raw"), 1.5)
        z = _row(t["vision_dense"]["rows"], "zrecord-zstd")
        if z:
            add("dense zstd gather >= 90% of zstd's own decompression (all threads)",
                z["gather_mibs"] / t["vision_dense"]["limits"]["zstd_all"], 0.90, "{:.0%}")
    if "token_blocks" in t:
        add("fixed 2 KiB token blocks raw >= 1.0x numpy memmap",
            ratio("token_blocks", "zrecord-raw", "npy-mmap-raw"), 1.0)
    if "token_ragged" in t:
        add("ragged real tokens (zrecord-raw) >= 4.0x LMDB",
            ratio("token_ragged", "zrecord-raw", "lmdb-raw"), 4.0)
    if "vision_ragged" in t:
        add("ragged vision (zrecord-raw) >= 1.5x LMDB",
            ratio("vision_ragged", "zrecord-raw", "lmdb-raw"), 1.5)
    if res.get("sampler"):
        add("sampler >= 2.5x numpy (smallest ratio over batch 256/1024/8192)",
            min(r["ratio"] for r in res["sampler"]), 2.5)
    ld = {r["loader"]: r for r in res.get("loader", [])}
    best = max((ld[k] for k in ("loaderx-zstd", "loaderx-raw") if k in ld),
               key=lambda r: r["batches_s"], default=None)
    if best and "torch" in ld:
        add(f"loader ({best['loader']}) >= 2.0x torch DataLoader", 
            best["batches_s"] / ld["torch"]["batches_s"], 2.0)
        add(f"loader ({best['loader']}) peak RSS <= 1/4 of torch's",
            ld["torch"]["peak_rss"] / best["peak_rss"], 4.0, "torch / ours = {:.2f}x")
    if best and "grain" in ld:
        add(f"loader ({best['loader']}) ahead of grain",
            best["batches_s"] / ld["grain"]["batches_s"], 1.0)
    for tb in res["tables"]:
        rows = tb["rows"]
        ours = [r for r in rows if r["backend"].startswith("zrecord")]
        bp = _best_peer(rows)
        if ours and bp:
            b = max(ours, key=lambda r: r["gather_mibs"])
            add(f"{tb['name']}: best zrecord ({b['backend']}) ahead of best peer "
                f"({bp['backend']}) on gather", b["gather_mibs"] / bp["gather_mibs"], 1.0)
        z = _row(rows, "zrecord-zstd")
        cp = _best_peer(rows, compressed=True)
        if z and cp:
            add(f"{tb['name']}: zrecord-zstd ahead of best compressed peer ({cp['backend']}, "
                f"ratio {cp['ratio']:.2f}x vs {z['ratio']:.2f}x)",
                z["gather_mibs"] / cp["gather_mibs"], 1.0)
    return out


def _plots(res, imgdir):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    os.makedirs(imgdir, exist_ok=True)
    names = []
    for tb in res["tables"]:
        rows = sorted(tb["rows"], key=lambda r: r["gather_mibs"])
        fig, ax = plt.subplots(figsize=(7, 0.28 * len(rows) + 1.2), dpi=80)
        colors = ["tab:orange" if r["backend"].startswith("zrecord") else "tab:blue"
                  for r in rows]
        ax.barh([r["backend"] for r in rows], [r["gather_mibs"] for r in rows], color=colors)
        ax.axvline(res["memcpy"]["all"], color="gray", ls="--", lw=1, label="memcpy, all threads")
        ax.set_xscale("log")
        ax.set_xlabel("logical gather MiB/s (log scale)")
        ax.set_title(f"{tb['name']}: random batch gather", fontsize=10)
        ax.tick_params(labelsize=8)
        ax.legend(fontsize=7, loc="lower right")
        fig.tight_layout()
        fn = f"bench_{tb['name']}.png"
        fig.savefig(os.path.join(imgdir, fn))
        plt.close(fig)
        names.append((tb["name"], fn))
    # Throughput against record size, one line per backend present in several tables.
    fig, ax = plt.subplots(figsize=(7, 4.2), dpi=80)
    series = {}
    for tb in res["tables"]:
        for r in tb["rows"]:
            series.setdefault(r["backend"], []).append((tb["record_kib"], r["gather_mibs"]))
    for name, pts in sorted(series.items()):
        pts.sort()
        ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", ms=3,
                lw=2 if name.startswith("zrecord") else 1, label=name)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("mean record size (KiB, log)")
    ax.set_ylabel("logical gather MiB/s (log)")
    ax.set_title("gather throughput per record size", fontsize=10)
    ax.legend(fontsize=6, ncol=2)
    fig.tight_layout()
    fig.savefig(os.path.join(imgdir, "bench_record_size.png"))
    plt.close(fig)
    names.append(("record size", "bench_record_size.png"))
    return names


def write(res, outdir):
    os.makedirs(outdir, exist_ok=True)
    plots = _plots(res, os.path.join(outdir, "img"))
    m, mem = res["machine"], res["memcpy"]
    L = []
    w = L.append
    w("# Benchmarks")
    w("")
    w("Generated by `python3 bench/run.py`" + (" --quick (smoke sizes: not meaningful)"
                                             if res["quick"] else "") +
      f" in {res['elapsed_s'] / 60:.1f} minutes; do not edit by hand. "
      "Method, scaling and caveats: the notes at the end.")
    w("")
    w("## Machine")
    w("")
    w("| machine | value |")
    w("|---|---|")
    w(f"| CPU | {m.get('cpu', '?')}, {m['cpus']} logical CPUs |")
    if m.get("caches"):
        w(f"| caches | {m['caches']} |")
    w(f"| memory | {m['memory_gib']:.1f} GiB |")
    w(f"| OS | {m.get('os', '?')}, kernel {m['kernel']} |")
    w(f"| python | {m['python']}, numpy {m['numpy']} |")
    w("")
    w("## Physical limits (same run)")
    w("")
    w("| limit | value |")
    w("|---|---:|")
    w(f"| memcpy, 1 thread | {mem['1t']:.0f} MiB/s |")
    w(f"| memcpy, all {m['cpus']} threads | {mem['all']:.0f} MiB/s |")
    for tb in res["tables"]:
        z = tb["limits"]
        w(f"| zstd decompression, {tb['name']} records, 1 thread | {z['zstd_1t']:.0f} MiB/s |")
        w(f"| zstd decompression, {tb['name']} records, all threads | {z['zstd_all']:.0f} MiB/s |")
    w("")
    w("## Goals")
    w("")
    w("| goal | measured | met |")
    w("|---|---:|:---:|")
    for g, v, ok in goals(res):
        w(f"| {g} | {v} | {'yes' if ok else '**no**'} |")
    w("")
    w("## Stores: random batch gather")
    w("")
    w("Logical MiB/s counts uncompressed payload bytes accepted (write) or returned "
      "(gather) by each public API. `vs best peer` divides by the fastest non-zrecord "
      "backend of the table, `vs memcpy` by the all-thread memcpy bandwidth.")
    for tb in res["tables"]:
        w("")
        w(f"### {tb['title']}")
        w("")
        w(f"{tb['describe']}.")
        w("")
        w("| backend | logical write | logical gather | krecords/s | p95 batch | disk | ratio "
          "| vs best peer | vs memcpy |")
        w("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
        bp = _best_peer(tb["rows"])
        for r in tb["rows"]:
            w(f"| {r['backend']} | {r['write_mibs']:.0f} MiB/s | {r['gather_mibs']:.0f} MiB/s "
              f"| {r['krec_s']:.1f} | {r['p95_ms']:.2f} ms | {_fmt_bytes(r['disk'])} "
              f"| {r['ratio']:.2f}x | {r['gather_mibs'] / bp['gather_mibs']:.2f}x "
              f"| {r['gather_mibs'] / mem['all']:.2f} |")
        w("")
        fn = dict(plots)[tb["name"]]
        w(f"![{tb['name']} gather](img/{fn})")
    w("")
    w("![gather throughput per record size](img/bench_record_size.png)")
    w("")
    w("## Sampler: iid index generation vs numpy")
    w("")
    w("`Sampler(1_000_000, batch, mode='iid').indices(step)` against "
      "`default_rng().integers(0, 1_000_000, batch)` (bench/bench_sampler.py's loop).")
    w("")
    w("| batch | loaderx M indices/s | numpy M indices/s | ratio |")
    w("|---:|---:|---:|---:|")
    for r in res["sampler"]:
        w(f"| {r['batch']} | {r['loaderx'] / 1e6:.1f} | {r['numpy'] / 1e6:.1f} | "
          f"{r['ratio']:.2f}x |")
    w("")
    w("## Loader end to end")
    w("")
    w(f"Dense vision records, batch {res['config']['batch']}, "
      f"{res['config']['loader_batches']} timed batches after 3 warm-up batches; each "
      "contender runs in its own process and applies the same transform (horizontal flip, "
      "materialized) to every batch. Peak RSS is the sum over the process and all its "
      "descendants, sampled every 20 ms (shared page-cache pages count once per process).")
    w("")
    w("| loader | batches/s | peak RSS (process tree) | vs torch |")
    w("|---|---:|---:|---:|")
    ld = res["loader"]
    torch = next((r for r in ld if r["loader"] == "torch"), None)
    for r in ld:
        vs = f"{r['batches_s'] / torch['batches_s']:.2f}x" if torch else "-"
        w(f"| {r['loader']} | {r['batches_s']:.1f} | {r['peak_rss'] / MiB:.0f} MiB | {vs} |")
    w("")
    w("## Command benchmarks (hyperfine)")
    w("")
    hf = res["hyperfine"]
    w(f"Each script under `bench/hyperfine/` exports hyperfine JSON; the dense vision "
      f".npy is {hf['npy_mib']:.0f} MiB.")
    w("")
    w("| script | command | mean | stddev | runs |")
    w("|---|---|---:|---:|---:|")
    for r in hf["results"]:
        w(f"| `{r['script']}` | {r['command']} | {r['mean_s'] * 1e3:.1f} ms | "
          f"{r['stddev_s'] * 1e3:.1f} ms | {r['runs']} |")
    w("")
    notes = os.path.join(os.path.dirname(os.path.abspath(__file__)), "NOTES.md")
    if os.path.exists(notes):
        with open(notes) as f:
            w(f.read().rstrip())
        w("")
    with open(os.path.join(outdir, "BENCHMARKS.md"), "w") as f:
        f.write("\n".join(L))
