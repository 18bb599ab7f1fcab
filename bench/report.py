"""Render the results of bench/run.py: BENCHMARKS.md (machine, limits,
every workload table, sampler, loader, hyperfine, goals) and PNG plots in
img/ beside it."""
import os
import statistics

MiB = 1 << 20


def _fmt_bytes(n):
    return f"{n / MiB:.1f} MiB" if n >= MiB else f"{n / 1024:.0f} KiB"


def _best_peer(rows, compressed=None):
    peers = [r for r in rows if not r["backend"].startswith("zrecord")
             and (compressed is None or r["compressed"] == compressed)]
    return max(peers, key=lambda r: r["gather_mibs"]) if peers else None


def _row(rows, name):
    return next((r for r in rows if r["backend"] == name), None)


def _loader(res, who, transform):
    return next((r for r in res.get("loader", []) if r["loader"] == who
                 and r.get("transform", "flip") == transform), None)


def new_goals(res):
    """(goal, threshold, measured, met, margin) rows of the write goals and
    the interleaved read method, where this run measured them. Each ratio
    is the median over the run's repeats, its range after it."""
    out = []

    def add(goal, values, target):
        if not values:
            return
        v = statistics.median(values)
        out.append((goal, f">= {target:.2f}x",
                    f"{v:.2f}x [{min(values):.2f}..{max(values):.2f}]", v >= target, v / target))

    w = res.get("writes") or {}
    for key, what in (("vision", "147 KiB"), ("blocks", "2 KiB")):
        r = (w.get(key) or {}).get("ratios", {})
        add(f"raw dense append ({what} records) vs np.save, page cache only (ours syncs at close)",
            r.get("zr-raw/npy"), 0.95)
        add(f"raw dense append ({what} records) vs np.save + fsync (the same durability)",
            r.get("zr-raw/npy+fsync"), 0.95)
        add(f"zstd append ({what} records) vs zstd's own all-thread level-3 compression",
            r.get("zr-zstd/zstd-mt"), 0.90)
    ing = res.get("ingest") or {}
    for key, what in (("zr-raw/litdata", "LitData optimize"), ("zr-raw/mds", "Mosaic MDSWriter"),
                      ("zr-zstd/litdata-zstd", "LitData optimize, both zstd"),
                      ("zr-zstd/mds-zstd", "Mosaic MDSWriter, both zstd")):
        add(f"zr ingest of an image folder (147 KiB files), records/s vs {what}",
            (ing.get("ratios") or {}).get(key), 1.0)
    for peer, why in (ing.get("skipped") or {}).items():
        out.append((f"zr ingest of an image folder vs {peer}", ">= 1.00x",
                    f"not measured: {why}", None, None))
    il = res.get("interleaved") or {}
    for key, what, target in (("vision_dense", "dense vision 147 KiB", 1.7),
                              ("token_blocks", "fixed 2 KiB token blocks", 1.2),
                              ("small_rows", "32-byte rows, 20,000 a call", 1.0)):
        if key in il:
            add(f"{what} raw store[idx] vs numpy memmap, interleaved batch by batch",
                il[key]["ratios"], target)
    return out


def goals(res):
    """(goal, threshold, measured, met, margin) rows: first every goal of
    the second performance round, in its order (met is None for a goal
    this run does not measure, with the command that does in `measured`),
    then the standing per-table comparisons. margin is measured /
    threshold (None when not measured)."""
    out = []
    t = {tb["name"]: tb for tb in res["tables"]}

    def ratio(table, a, b):
        if table not in t:
            return None
        ra, rb = _row(t[table]["rows"], a), _row(t[table]["rows"], b)
        return ra["gather_mibs"] / rb["gather_mibs"] if ra and rb else None

    def add(goal, value, target, fmt="{:.2f}x", tfmt=None, elsewhere=None):
        thr = (tfmt or ">= " + fmt).format(target)
        if value is None:
            out.append((goal, thr, elsewhere or "not measured", None, None))
        else:
            out.append((goal, thr, fmt.format(value), value >= target, value / target))

    for row in new_goals(res):
        out.append(row)
    add("20,000 random 32-byte rows (int32[8]), zrecord-raw vs numpy memmap",
        ratio("small_rows", "zrecord-raw", "npy-mmap-raw"), 1.0)
    add("fixed 2 KiB token blocks (int32[512]), raw vs numpy memmap",
        ratio("token_blocks", "zrecord-raw", "npy-mmap-raw"), 1.0)
    add("ragged real tokens (16..512), raw vs LMDB getmulti",
        ratio("token_ragged", "zrecord-raw", "lmdb-raw"), 5.0)
    add("ragged vision (3, H, W), raw vs LMDB",
        ratio("vision_ragged", "zrecord-raw", "lmdb-raw"), 1.5)
    add("dense vision 147 KiB raw vs numpy memmap",
        ratio("vision_dense", "zrecord-raw", "npy-mmap-raw"), 1.7)
    share = t["vision_dense"]["limits"].get("memcpy_share") if "vision_dense" in t else None
    add("dense vision 147 KiB raw, share of all-thread memcpy, side by side",
        share["share"] if share else None, 0.70, "{:.0%}")
    flip = [_loader(res, k, "flip") for k in ("loaderx-raw", "loaderx-zstd")]
    tflip, tid = _loader(res, "torch", "flip"), _loader(res, "torch", "identity")
    lraw, lid = flip[0], _loader(res, "loaderx-raw", "identity")
    wraw, wtorch = _loader(res, "loaderx-raw", "flip-worker"), _loader(res, "torch", "flip-worker")
    add("loader (raw) vs torch DataLoader, 4 workers, same flip transform, each in its "
        "workers (loaderx flip=, torch __getitem__)",
        wraw["batches_s"] / wtorch["batches_s"] if wraw and wtorch else None, 2.0)
    held = _loader(res, "held", "flip")
    ceiling = (f" (ceiling, no loader at all: {held['batches_s'] / tflip['batches_s']:.2f}x)"
               if held and tflip else "")
    add("loader (raw) vs torch DataLoader, 4 workers, same flip transform, in the consumer"
        + ceiling, lraw["batches_s"] / tflip["batches_s"] if lraw and tflip else None, 2.0)
    add("loader (raw) vs torch DataLoader, 4 workers, identity transform",
        lid["batches_s"] / tid["batches_s"] if lid and tid else None, 3.0)
    add("loader (raw, flip) peak RSS vs torch's (torch / ours)",
        tflip["peak_rss"] / lraw["peak_rss"] if lraw and tflip else None, 5.0,
        "{:.2f}x", ">= {:.0f}x (ours <= 1/5)")
    ra = res.get("readahead") or {}
    best = max(((k, v["of_medians"]) for k, v in ra.get("ratios", {}).items() if k != "auto"),
               key=lambda kv: kv[1], default=None)
    add(f"loader on a throttled device, {best[0] if best else 'readahead'} vs none (cold)",
        best[1] if best else None, 2.0,
        elsewhere=f"not measured here ({ra['skipped']}): python3 bench/bench_readahead.py"
        if "skipped" in ra else "python3 bench/bench_readahead.py")
    auto = ra.get("ratios", {}).get("auto")
    add("loader on a throttled device, the default (readahead auto) vs none (cold)",
        auto["of_medians"] if auto else None, 2.0,
        elsewhere="python3 bench/bench_readahead.py")
    share = t["vision_dense"]["limits"].get("zstd_share") if "vision_dense" in t else None
    add("dense zstd gather, share of zstd's own all-thread decompression, side by side (kept)",
        share["share"] if share else None, 0.90, "{:.0%}")
    add("sampler vs numpy, smallest over batch 256/1024/8192 (kept)",
        min(r["ratio"] for r in res["sampler"]) if res.get("sampler") else None, 2.5)
    bind = res.get("bindings") or {}
    vs = {x["binding"]: x["vs_c"] for x in bind.get("gather", [])}
    add("Lua and Go gather vs C, the smaller (kept)",
        min(vs["lua"], vs["go"]) if "lua" in vs and "go" in vs else None, 0.9,
        elsewhere=f"not measured here ({bind['skipped']}): bash bench/bindings/run.sh"
        if "skipped" in bind else "bash bench/bindings/run.sh")
    # Standing comparisons of every table.
    grain = _loader(res, "grain", "flip")
    best = max((x for x in flip if x), key=lambda r: r["batches_s"], default=None)
    if best and grain:
        add(f"loader ({best['loader']}) vs grain, flip",
            best["batches_s"] / grain["batches_s"], 1.0)
    for tb in res["tables"]:
        rows = tb["rows"]
        ours = [r for r in rows if r["backend"].startswith("zrecord")]
        bp = _best_peer(rows)
        if ours and bp:
            b = max(ours, key=lambda r: r["gather_mibs"])
            add(f"{tb['name']}: best zrecord ({b['backend']}) vs best peer "
                f"({bp['backend']}) on gather", b["gather_mibs"] / bp["gather_mibs"], 1.0)
        z = _row(rows, "zrecord-zstd")
        cp = _best_peer(rows, compressed=True)
        if z and cp:
            add(f"{tb['name']}: zrecord-zstd vs best compressed peer ({cp['backend']}, "
                f"ratio {cp['ratio']:.2f}x vs {z['ratio']:.2f}x)",
                z["gather_mibs"] / cp["gather_mibs"], 1.0)
    return out


def _scale_plot(sc, path, plt):
    sizes = sc["record_bytes"]
    cols = 2 if len(sizes) > 1 else 1
    rows = -(-len(sizes) // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(7, 2.8 * rows + 0.6), dpi=80, squeeze=False)
    style = {"zrecord-raw": ("tab:orange", "-"), "zrecord-raw-out": ("tab:orange", "--"),
             "zrecord-zstd": ("tab:red", "-"), "npy-mmap-raw": ("tab:blue", "-")}
    for k, rb in enumerate(sizes):
        ax = axes[k // cols][k % cols]
        for name, (color, ls) in style.items():
            pts = sorted((c["batch"], c["ns_per_record"]) for c in sc["cells"]
                         if c["record_bytes"] == rb and c["backend"] == name)
            if pts:
                ax.plot([p[0] for p in pts], [p[1] for p in pts], color=color, ls=ls,
                        marker="o", ms=3, label=name)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_title(f"{_fmt_size(rb)} records", fontsize=9)
        ax.set_xlabel("batch size (records)", fontsize=8)
        ax.set_ylabel("ns per record", fontsize=8)
        ax.tick_params(labelsize=7)
        ax.legend(fontsize=6)
    for k in range(len(sizes), rows * cols):
        axes[k // cols][k % cols].axis("off")
    fig.suptitle("gather time per record (lower is better)", fontsize=10)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def _fmt_size(n):
    if n >= MiB:
        return f"{n // MiB} MiB"
    return f"{n // 1024} KiB" if n >= 1024 else f"{n} B"


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
    if res.get("scale"):
        _scale_plot(res["scale"], os.path.join(imgdir, "bench_scale.png"), plt)
        names.append(("scale", "bench_scale.png"))
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
        for key, what in (("memcpy_share", "memcpy all threads"),
                          ("zstd_share", "zstd all threads")):
            if key in z:
                sh = z[key]
                w(f"| side by side, {tb['name']}: {what} / {sh['backend']} gather, best of "
                  f"{sh['rounds']} alternating passes | {sh['limit_mibs']:.0f} / "
                  f"{sh['gather_mibs']:.0f} MiB/s |")
    w("")
    w("## Goals")
    w("")
    w("Ratios of this run, side by side. margin = measured / threshold: a goal counts as "
      "met only with a margin larger than the run-to-run noise the notes report.")
    w("")
    w("| goal | threshold | measured | margin | met |")
    w("|---|---:|---:|---:|:---:|")
    for g, thr, v, ok, margin in goals(res):
        m = f"{margin:.2f}" if margin is not None else "-"
        met = "yes" if ok else "**no**" if ok is not None else "not measured here"
        w(f"| {g} | {thr} | {v} | {m} | {met} |")
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
    sc = res.get("scale")
    if sc:
        w("")
        w("## Scale: time per record against batch size and record size")
        w("")
        w("Median wall time of one gather of a random batch (indices drawn with "
          "replacement) divided by the batch size, in ns per record: zrecord raw and zstd "
          "through `store[idx]`, raw through `store.gather(idx, out=)` into a reused "
          "array, and a numpy `.npy` memmap fancy index; every store is read back and "
          "compared with its source first. `vs numpy` is numpy's time over zrecord-raw's "
          "(above 1: zrecord wins). Cells over the batch byte cap are left out.")
        w("")
        names = [b for b in ("zrecord-raw", "zrecord-raw-out", "zrecord-zstd", "npy-mmap-raw")
                 if any(c["backend"] == b for c in sc["cells"])]
        w("| record | batch | " + " | ".join(names) + " | vs numpy |")
        w("|---:|---:|" + "---:|" * len(names) + "---:|")
        for rb in sc["record_bytes"]:
            for bt in sc["batches"]:
                cell = {c["backend"]: c["ns_per_record"] for c in sc["cells"]
                        if c["record_bytes"] == rb and c["batch"] == bt}
                if not cell:
                    continue
                vs = (f"{cell['npy-mmap-raw'] / cell['zrecord-raw']:.2f}x"
                      if "npy-mmap-raw" in cell and "zrecord-raw" in cell else "-")
                w(f"| {_fmt_size(rb)} | {bt:,} | " +
                  " | ".join(f"{cell[n]:,.0f}" if n in cell else "-" for n in names) +
                  f" | {vs} |")
        w("")
        w("![gather time per record](img/bench_scale.png)")
    w("")
    w("## Sampler: iid index generation vs numpy")
    w("")
    w("`Sampler(1_000_000, batch, mode='iid').indices(step)` against "
      "`default_rng().integers(0, 1_000_000, batch)` (bench/bench_sampler.py's loop), "
      "each contender's best of 5 alternating rounds."
      + (f" The iid kernel on this host: `{res['sampler'][0]['kernel']}` "
         "(`zsm_simd()`; every kernel draws the same indices)."
         if res["sampler"] and "kernel" in res["sampler"][0] else ""))
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
      f"{res['config']['loader_batches']} timed batches after 3 warm-up batches, "
      f"best of {res['config'].get('loader_rounds', 1)} rounds (every contender once per "
      "round, in turn); each "
      "contender runs in its own process and applies the same transform to every batch: "
      "a horizontal flip, materialized, or the identity (the batch as delivered). "
      "`flip-worker` is the same flip of every record done where each loader runs "
      "per-record work, the consumer taking the batch as delivered: loaderx's native "
      "flip stage (`DataLoader(flip={'x': 1.0})`, on its gather threads), torch's "
      "`Dataset.__getitem__` in its 4 worker processes, a grain `MapTransform` in its "
      "4 workers. A flip in the consumer is a serial cost no loader can hide; in the "
      "workers it overlaps the training step: `held` is no loader at all, one batch "
      "read once and handed to the consumer again and again, so its rate is the "
      "consumer's own cost per batch and the ceiling of every loader under that "
      "transform. Peak "
      "RSS is the sum over the process and all its descendants, sampled every 20 ms "
      "(shared page-cache pages count once per process). `vs torch` compares with torch "
      "under the same transform.")
    w("")
    w("| loader | transform | batches/s | peak RSS (process tree) | vs torch |")
    w("|---|---|---:|---:|---:|")
    for r in res["loader"]:
        tf = r.get("transform", "flip")
        torch = _loader(res, "torch", tf)
        vs = f"{r['batches_s'] / torch['batches_s']:.2f}x" if torch else "-"
        w(f"| {r['loader']} | {tf} | {r['batches_s']:.1f} | {r['peak_rss'] / MiB:.0f} MiB "
          f"| {vs} |")
    w("")
    if res.get("readahead"):
        import bench_readahead
        for line in bench_readahead.markdown(res["readahead"]):
            w(line)
    bind = res.get("bindings") or {}
    if bind.get("gather"):
        w("## Bindings: Lua and Go vs C")
        w("")
        w(f"`bash bench/bindings/run.sh`: {bind['rounds']} gathers of 256 random 147 KiB "
          f"records from a raw dense store of {bind['records']:,}, into one reused buffer "
          "per language (Lua `gather_into`, Go `GatherInto`; `lua-string` is Lua's gather "
          "to a new string); five passes in turn, each language's best. Then the cost of "
          f"one call: {bind['calls']:,} 1-record gathers of 64-byte records.")
        w("")
        w("| binding | ms per gather | vs C |")
        w("|---|---:|---:|")
        for x in bind["gather"]:
            w(f"| {x['binding']} | {x['ms']:.3f} | {x['vs_c']:.3f}x |")
        w("")
        w("| binding | us per 1-record call | over C (us) |")
        w("|---|---:|---:|")
        for x in bind["call"]:
            w(f"| {x['binding']} | {x['us']:.3f} | {x['over_c_us']:.3f} |")
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
