#!/usr/bin/env python3
"""Benchmark (not a test): the loader on a device that is slow for real,
with and without readahead hints (posix_fadvise WILLNEED on the records of
steps ahead, the loader's `readahead`).

    sudo python3 bench/bench_readahead.py [--mib 1024] [--rbps-mb 50]
        [--riops 2000] [--read-ahead-kb 128] [--repeats 3] [--readahead 4,16]
        [--steps 40] [--warm-steps 2000] [--record 4096] [--batch 256]
        [--workers 2] [--prefetch 4] [--dir /var/tmp/zr_bench_readahead]
        [--no-warm] [--json FILE]

About 3 minutes with the defaults (a 1 GiB store; the runs without hints
are the slow ones).

Evicting a store's pages inside a VM (POSIX_FADV_DONTNEED, drop_caches) does
not make its disk slow: the host may keep the VM image in its own cache and
serve the "cold" reads at memory speed. So the store is built on a device of
its own whose speed is set here:

- a loop device over an image file (ext4 on it), and
- a block-I/O throttle on that device, for reads: cgroup v2 `io.max`
  (`rbps=`, `riops=`) where the v2 hierarchy has the io controller, else the
  cgroup v1 blkio throttle (`blkio.throttle.read_bps_device`,
  `read_iops_device`), the same kernel throttle (blk-throttle).

Each timed run is a child process inside that cgroup, so every read the
loader's threads make (page faults of the mapped chunks, pread, and the
kernel readahead that WILLNEED starts) is throttled. Before each cold run
the file system is unmounted and mounted again, which drops the device's
cached pages and nothing else on the machine. The runs alternate
(none, readahead N, ..., none, ...) so drift of the machine's load spreads
over every setting. The child also reports the bytes and I/Os the throttle
counted, so read amplification (page-fault read-around) shows.

A warm run per setting (store read into the page cache first, outside the
throttle) shows what hints cost when the data is cached.

Needs root, loop devices, mkfs.ext4 (e2fsprogs; scripts/setup.sh --tests
installs it) and a cgroup with the block-I/O throttle. Elsewhere it prints
"skip: <reason>" and exits 0. `measure(**options)` returns the results as a
dict (bench/run.py can include them); `{"skipped": reason}` when skipped.
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))

DEFAULTS = {"dir": "/var/tmp/zr_bench_readahead", "mib": 1024, "record": 4096,
            "batch": 256, "steps": 40, "workers": 2, "prefetch": 4,
            "readahead": (4, 16), "repeats": 3, "warm_steps": 2000, "rbps_mb": 50, "riops": 2000,
            "warm": True, "read_ahead_kb": 128}


class Skip(Exception):
    """The machine cannot make a throttled device; the message says why."""


def _run(cmd, **kw):
    return subprocess.run(cmd, check=True, capture_output=True, text=True, **kw)


def _write(path, text):
    with open(path, "w") as f:
        f.write(text)


# ----------------------------------------------------------------- cgroups

def _mounts():
    with open("/proc/mounts") as f:
        return [line.split() for line in f]


class Throttle:
    """A cgroup whose reads of one block device (major:minor) are limited to
    rbps bytes/s and riops I/Os per second."""

    def __init__(self, name):
        self.kind = None
        self.path = None
        for m in _mounts():
            if m[2] == "cgroup2":
                try:
                    with open(os.path.join(m[1], "cgroup.controllers")) as f:
                        if "io" in f.read().split():
                            self.kind, self.root = "v2", m[1]
                            break
                except OSError:
                    pass
        if self.kind is None:
            for m in _mounts():
                if m[2] == "cgroup" and "blkio" in m[3].split(","):
                    if os.path.exists(os.path.join(m[1], "blkio.throttle.read_bps_device")):
                        self.kind, self.root = "v1", m[1]
                        break
        if self.kind is None:
            raise Skip("no cgroup with the block-I/O throttle (neither a cgroup v2 "
                       "hierarchy with the io controller nor a v1 blkio hierarchy)")
        self.path = os.path.join(self.root, name)
        try:
            if self.kind == "v2":
                with open(os.path.join(self.root, "cgroup.subtree_control")) as f:
                    if "io" not in f.read().split():
                        _write(os.path.join(self.root, "cgroup.subtree_control"), "+io")
            os.makedirs(self.path, exist_ok=True)
        except OSError as exc:
            raise Skip(f"cannot make cgroup {self.path}: {exc}") from exc

    def limit(self, dev, rbps, riops):
        self.dev = dev
        try:
            if self.kind == "v2":
                _write(os.path.join(self.path, "io.max"), f"{dev} rbps={rbps} riops={riops}")
            else:
                _write(os.path.join(self.path, "blkio.throttle.read_bps_device"),
                       f"{dev} {rbps}")
                _write(os.path.join(self.path, "blkio.throttle.read_iops_device"),
                       f"{dev} {riops}")
        except OSError as exc:
            raise Skip(f"cannot throttle device {dev} in {self.path}: {exc}") from exc

    def settings(self):
        if self.kind == "v2":
            files = ["io.max"]
        else:
            files = ["blkio.throttle.read_bps_device", "blkio.throttle.read_iops_device"]
        out = {}
        for name in files:
            with open(os.path.join(self.path, name)) as f:
                out[name] = f.read().strip()
        return out

    def counters(self):
        """(bytes read, read I/Os) on the device so far, as the throttle
        counted them for this cgroup."""
        if self.kind == "v2":
            with open(os.path.join(self.path, "io.stat")) as f:
                for line in f:
                    parts = line.split()
                    if parts and parts[0] == self.dev:
                        kv = dict(p.split("=", 1) for p in parts[1:])
                        return int(kv.get("rbytes", 0)), int(kv.get("rios", 0))
            return 0, 0
        vals = []
        for name in ("blkio.throttle.io_service_bytes", "blkio.throttle.io_serviced"):
            v = 0
            with open(os.path.join(self.path, name)) as f:
                for line in f:
                    parts = line.split()
                    if len(parts) == 3 and parts[0] == self.dev and parts[1] == "Read":
                        v = int(parts[2])
            vals.append(v)
        return vals[0], vals[1]

    def remove(self):
        if self.path and os.path.isdir(self.path):
            try:
                os.rmdir(self.path)
            except OSError:
                pass


# ------------------------------------------------------------- the device

class Device:
    """An ext4 file system on a loop device over `image`, mounted at `mnt`."""

    def __init__(self, workdir, mib):
        for tool in ("losetup", "blockdev", "mkfs.ext4", "mount", "umount"):
            if shutil.which(tool) is None:
                raise Skip(f"'{tool}' is not on PATH (Debian: util-linux, mount, e2fsprogs; "
                           "scripts/setup.sh --tests installs them)")
        if not os.path.exists("/dev/loop-control"):
            raise Skip("the kernel has no loop devices (/dev/loop-control is missing)")
        self.image = os.path.join(workdir, "device.img")
        self.mnt = os.path.join(workdir, "mnt")
        self.loop = None
        os.makedirs(self.mnt, exist_ok=True)
        size = (mib + mib // 8 + 64) << 20  # the store, ext4's metadata and journal
        with open(self.image, "wb") as f:
            f.truncate(size)
        try:
            self.loop = _run(["losetup", "--find", "--show", self.image]).stdout.strip()
        except subprocess.CalledProcessError as exc:
            raise Skip(f"losetup cannot attach a loop device: {exc.stderr.strip()}") from exc
        st = os.stat(self.loop)
        self.dev = f"{os.major(st.st_rdev)}:{os.minor(st.st_rdev)}"
        try:
            # Initialised up front: no lazy inode-table writes during the runs.
            _run(["mkfs.ext4", "-q", "-F", "-E", "lazy_itable_init=0,lazy_journal_init=0",
                  self.loop])
            self.mount()
        except subprocess.CalledProcessError as exc:  # e.g. a container without mount rights
            loop = self.loop
            self.close()
            raise Skip(f"cannot make a file system on {loop}: {' '.join(exc.cmd)}: "
                       f"{exc.stderr.strip()}") from exc

    def mount(self):
        _run(["mount", "-o", "noatime", self.loop, self.mnt])

    def evict(self):
        """Drop every cached page of this device (and only of it)."""
        _run(["umount", self.mnt])
        _run(["blockdev", "--flushbufs", self.loop])
        self.mount()

    def read_ahead_kb(self, set_kb=None):
        """The kernel's readahead window of the device (KiB); set it first
        when set_kb is given (None: keep the kernel's choice)."""
        path = f"/sys/block/{os.path.basename(self.loop)}/queue/read_ahead_kb"
        try:
            if set_kb is not None:
                _write(path, str(int(set_kb)))
            with open(path) as f:
                return int(f.read())
        except OSError:
            return None

    def close(self):
        if os.path.ismount(self.mnt):
            subprocess.run(["umount", self.mnt], capture_output=True)
        if self.loop:
            subprocess.run(["losetup", "-d", self.loop], capture_output=True)
            self.loop = None
        if os.path.exists(self.image):
            os.unlink(self.image)


# ------------------------------------------------------------------ store

def build(path, n, record):
    import numpy as np
    from loaderx.zrecord import DenseStore
    rng = np.random.default_rng(0)
    with DenseStore.create(path, np.uint8, (record,), codec="raw") as s:
        step = max(1, (64 << 20) // record)
        for i in range(0, n, step):
            k = min(step, n - i)
            s.append(rng.integers(0, 256, size=(k, record), dtype=np.uint8))


def read_all(path):
    """Read every file of the store into the page cache."""
    for name in os.listdir(path):
        with open(os.path.join(path, name), "rb") as f:
            while f.read(8 << 20):
                pass


# ------------------------------------------------------------------ child

def child(args):
    """One timed run, inside the throttled cgroup (joined before any read)."""
    if args.cgroup:
        _write(os.path.join(args.cgroup, "cgroup.procs"), str(os.getpid()))
    from loaderx.dataloader import DataLoader
    from loaderx.zrecord import DenseStore
    ra = None if args.child_readahead < 0 else args.child_readahead
    with DenseStore.open(args.store) as s:
        dl = DataLoader({"x": s}, batch_size=args.batch, mode="iid", seed=args.seed,
                        num_workers=args.workers, prefetch=args.prefetch, readahead=ra)
        t0 = time.perf_counter()
        first = None
        for _ in range(args.steps):
            next(dl)
            if first is None:
                first = time.perf_counter() - t0
        dt = time.perf_counter() - t0
        dl.close()
    json.dump({"batches_per_s": args.steps / dt, "seconds": dt, "first_batch_s": first},
              sys.stdout)


def timed(opt, throttle, store, readahead, seed, steps=None):
    b0, n0 = throttle.counters() if throttle else (0, 0)
    cmd = [sys.executable, os.path.abspath(__file__), "--child", "--cgroup",
           throttle.path if throttle else "",
           "--store", store, "--child-readahead", str(readahead), "--seed", str(seed),
           "--batch", str(opt["batch"]), "--steps", str(steps or opt["steps"]),
           "--workers", str(opt["workers"]), "--prefetch", str(opt["prefetch"])]
    out = _run(cmd).stdout
    r = json.loads(out)
    b1, n1 = throttle.counters() if throttle else (0, 0)
    r["device_mib"] = (b1 - b0) / 2**20
    r["device_ios"] = n1 - n0
    return r


# ------------------------------------------------------------------ driver

def _label(ra):
    return "none" if ra == 0 else ("auto" if ra < 0 else f"readahead {ra}")


def _summary(vals):
    return {"median": statistics.median(vals), "min": min(vals), "max": max(vals),
            "runs": vals}


def measure_warm(log=print, **options):
    """Only the warm-cache comparison, without a device or a throttle (no
    root needed): a store in opt["dir"] read into the page cache, then
    `repeats` rounds of one child per setting in turn (none, readahead N,
    auto), each `warm_steps` steps. Returns per setting the batches/s of
    every round and, per setting, its ratio to none round by round."""
    opt = dict(DEFAULTS, **options)
    settings = [0] + [int(r) for r in opt["readahead"] if int(r) > 0] + [-1]
    n = (opt["mib"] << 20) // opt["record"]
    store = os.path.join(opt["dir"], "warm-store")
    shutil.rmtree(store, ignore_errors=True)
    os.makedirs(opt["dir"], exist_ok=True)
    try:
        log(f"building {opt['mib']} MiB store ({n} x {opt['record']} B) in {opt['dir']}")
        build(store, n, opt["record"])
        read_all(store)
        res = {"store_mib": opt["mib"], "warm_steps": opt["warm_steps"],
               "repeats": opt["repeats"], "warm": {}, "vs_none": {}, "loadavg": []}
        runs = {ra: [] for ra in settings}
        for rep in range(opt["repeats"]):
            order = settings[rep % len(settings):] + settings[:rep % len(settings)]
            for ra in order:
                runs[ra].append(timed(opt, None, store, ra, seed=1 + rep,
                                      steps=opt["warm_steps"])["batches_per_s"])
            res["loadavg"].append(os.getloadavg()[0])
        for ra in settings:
            res["warm"][_label(ra)] = runs[ra]
            per = [a / b for a, b in zip(runs[ra], runs[0])]
            res["vs_none"][_label(ra)] = per
            log(f"warm  {_label(ra):13s} median {statistics.median(runs[ra]):8.0f} batches/s  "
                f"vs none: median {statistics.median(per):.3f}x [{min(per):.3f}..{max(per):.3f}]")
        log(f"load average after each round: {', '.join(f'{x:.1f}' for x in res['loadavg'])}")
        return res
    finally:
        shutil.rmtree(store, ignore_errors=True)


def measure(log=print, **options):
    """Run the benchmark; returns a dict of the settings and results, or
    {"skipped": reason} when this machine cannot make a throttled device."""
    opt = dict(DEFAULTS, **options)
    settings = [0] + [int(r) for r in opt["readahead"] if int(r) > 0] + [-1]
    if os.geteuid() != 0:
        return {"skipped": "needs root (a loop device, mount and a cgroup throttle)"}
    n = (opt["mib"] << 20) // opt["record"]
    os.makedirs(opt["dir"], exist_ok=True)
    dev = throttle = None
    try:
        throttle = Throttle(f"zr_bench_readahead_{os.getpid()}")
        dev = Device(opt["dir"], opt["mib"])
        store = os.path.join(dev.mnt, "store")
        log(f"building {opt['mib']} MiB store ({n} x {opt['record']} B) on {dev.loop}")
        build(store, n, opt["record"])
        os.sync()
        rbps = int(opt["rbps_mb"] * 1e6)
        throttle.limit(dev.dev, rbps, int(opt["riops"]))
        res = {"store_mib": opt["mib"], "records": n, "record_bytes": opt["record"],
               "batch": opt["batch"], "steps": opt["steps"], "workers": opt["workers"],
               "prefetch": opt["prefetch"], "repeats": opt["repeats"],
               "warm_steps": opt["warm_steps"],
               "throttle": {"cgroup": throttle.kind, "device": dev.dev,
                            "rbps": rbps, "riops": int(opt["riops"]),
                            "files": throttle.settings()},
               "device_read_ahead_kb": dev.read_ahead_kb(opt["read_ahead_kb"]),
               "loadavg_start": os.getloadavg(), "cold": {}, "warm": {}}
        cold = {ra: [] for ra in settings}
        for rep in range(opt["repeats"]):
            for ra in settings:
                dev.evict()
                r = timed(opt, throttle, store, ra, seed=1 + rep)
                cold[ra].append(r)
                log(f"cold  rep {rep + 1}  {_label(ra):13s} {r['batches_per_s']:8.2f} batches/s"
                    f"  device {r['device_mib']:7.1f} MiB in {r['device_ios']:6d} I/Os")
        for ra in settings:
            rs = cold[ra]
            res["cold"][_label(ra)] = {
                "batches_per_s": _summary([r["batches_per_s"] for r in rs]),
                "device_mib": _summary([r["device_mib"] for r in rs]),
                "device_ios": _summary([r["device_ios"] for r in rs]),
                "first_batch_s": _summary([r["first_batch_s"] for r in rs])}
        base = cold[0]
        res["ratios"] = {}
        for ra in settings[1:]:
            per_rep = [a["batches_per_s"] / b["batches_per_s"] for a, b in zip(cold[ra], base)]
            res["ratios"][_label(ra)] = {
                "of_medians": (res["cold"][_label(ra)]["batches_per_s"]["median"] /
                               res["cold"]["none"]["batches_per_s"]["median"]),
                "per_repeat": per_rep, "min": min(per_rep), "max": max(per_rep)}
        if opt["warm"]:
            dev.evict()
            read_all(store)  # outside the cgroup: not throttled
            warm = {ra: [] for ra in settings}
            for rep in range(opt["repeats"]):  # alternating, as the cold runs
                for ra in settings:
                    warm[ra].append(timed(opt, throttle, store, ra, seed=1 + rep,
                                          steps=opt["warm_steps"])["batches_per_s"])
            for ra in settings:
                res["warm"][_label(ra)] = _summary(warm[ra])
                log(f"warm  {_label(ra):13s} median {statistics.median(warm[ra]):8.2f} "
                    "batches/s")
        res["loadavg_end"] = os.getloadavg()
        return res
    except Skip as exc:
        return {"skipped": str(exc)}
    finally:
        if dev is not None:
            dev.close()
        if throttle is not None:
            throttle.remove()


def report(res):
    """Plain-text lines for a result of measure()."""
    if "skipped" in res:
        return [f"skip: {res['skipped']}"]
    t = res["throttle"]
    lines = [f"store {res['records']} x {res['record_bytes']} B ({res['store_mib']} MiB) on a "
             f"loop device {t['device']}, reads throttled to {t['rbps'] / 1e6:.0f} MB/s and "
             f"{t['riops']} IOPS (cgroup {t['cgroup']}); device read_ahead_kb "
             f"{res['device_read_ahead_kb']}",
             f"loader: iid batches of {res['batch']}, {res['steps']} steps, workers "
             f"{res['workers']}, prefetch {res['prefetch']}; {res['repeats']} repeats, cold "
             f"(device cache dropped) before each; load {res['loadavg_start'][0]:.2f} -> "
             f"{res['loadavg_end'][0]:.2f}",
             f"{'setting':14s} {'cold batch/s median [min..max]':>32s} {'device MiB':>11s} "
             f"{'I/Os':>7s} {'warm batch/s':>13s}"]
    for label, c in res["cold"].items():
        b = c["batches_per_s"]
        w = res["warm"].get(label)
        lines.append(f"{label:14s} {b['median']:12.2f} [{b['min']:7.2f} .. {b['max']:7.2f}] "
                     f"{c['device_mib']['median']:11.1f} {c['device_ios']['median']:7.0f} "
                     f"{w['median'] if w else float('nan'):13.1f}")
    for label, r in res["ratios"].items():
        lines.append(f"{label} vs none: {r['of_medians']:.2f}x (per repeat "
                     f"{r['min']:.2f}..{r['max']:.2f}x)")
    return lines


def markdown(res):
    """A Markdown section for docs/BENCHMARKS.md from a result of measure()."""
    out = ["## Readahead on a throttled device", ""]
    if "skipped" in res:
        return out + [f"Not measured: {res['skipped']} (bench/bench_readahead.py).", ""]
    t = res["throttle"]
    out += [f"A {res['store_mib']} MiB dense store of {res['record_bytes']} B records on a "
            f"loop device whose reads are throttled (cgroup {t['cgroup']} blk-throttle) to "
            f"{t['rbps'] / 1e6:.0f} MB/s and {t['riops']} IOPS, device readahead window "
            f"{res['device_read_ahead_kb']} KiB; the loader reads iid batches of "
            f"{res['batch']} ({res['steps']} steps, {res['workers']} workers, prefetch "
            f"{res['prefetch']}), the device's cache dropped before each of "
            f"{res['repeats']} alternating repeats. Warm: the store in the page cache, "
            f"{res['warm_steps']} steps.", "",
            "| readahead | cold batches/s (median, min..max) | cold vs none | device MiB "
            "read | warm batches/s | warm vs none |", "|---|---:|---:|---:|---:|---:|"]
    warm0 = res["warm"].get("none")
    for label, c in res["cold"].items():
        b = c["batches_per_s"]
        ratio = res["ratios"][label]["of_medians"] if label in res["ratios"] else 1.0
        w = res["warm"].get(label)
        warm = f"{w['median']:.0f} | {w['median'] / warm0['median']:.2f}x" if w else "- | -"
        out.append(f"| {label} | {b['median']:.2f} ({b['min']:.2f}..{b['max']:.2f}) | "
                   f"{ratio:.2f}x | {c['device_mib']['median']:.0f} | {warm} |")
    return out + [""]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dir", default=DEFAULTS["dir"], help="where the device image goes")
    ap.add_argument("--mib", type=int, default=DEFAULTS["mib"], help="store size")
    ap.add_argument("--record", type=int, default=DEFAULTS["record"])
    ap.add_argument("--batch", type=int, default=DEFAULTS["batch"])
    ap.add_argument("--steps", type=int, default=DEFAULTS["steps"])
    ap.add_argument("--workers", type=int, default=DEFAULTS["workers"])
    ap.add_argument("--prefetch", type=int, default=DEFAULTS["prefetch"])
    ap.add_argument("--readahead", default=",".join(map(str, DEFAULTS["readahead"])),
                    help="comma-separated readahead distances (steps) compared with none")
    ap.add_argument("--repeats", type=int, default=DEFAULTS["repeats"])
    ap.add_argument("--rbps-mb", type=float, default=DEFAULTS["rbps_mb"],
                    help="read bandwidth limit, MB/s (10^6 bytes)")
    ap.add_argument("--riops", type=int, default=DEFAULTS["riops"], help="read I/O limit per s")
    ap.add_argument("--read-ahead-kb", type=int, default=DEFAULTS["read_ahead_kb"],
                    help="the device's kernel readahead window, KiB (-1: the kernel's choice)")
    ap.add_argument("--warm-steps", type=int, default=DEFAULTS["warm_steps"],
                    help="steps of each warm-cache run")
    ap.add_argument("--no-warm", action="store_true", help="skip the warm-cache runs")
    ap.add_argument("--warm-only", action="store_true",
                    help="only the warm-cache runs, on a store in --dir (no device, no "
                    "throttle, no root), the settings alternating round by round")
    ap.add_argument("--json", default=None, help="also write the results here")
    # The timed child (internal).
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--cgroup", help=argparse.SUPPRESS)
    ap.add_argument("--store", help=argparse.SUPPRESS)
    ap.add_argument("--child-readahead", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--seed", type=int, default=1, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(args)
        return
    if args.warm_only:
        res = measure_warm(dir=args.dir, mib=args.mib, record=args.record, batch=args.batch,
                           workers=args.workers, prefetch=args.prefetch,
                           readahead=[int(x) for x in args.readahead.split(",") if x],
                           repeats=args.repeats, warm_steps=args.warm_steps)
        if args.json:
            with open(args.json, "w") as f:
                json.dump(res, f, indent=1)
        return
    res = measure(dir=args.dir, mib=args.mib, record=args.record, batch=args.batch,
                  steps=args.steps, workers=args.workers, prefetch=args.prefetch,
                  readahead=[int(x) for x in args.readahead.split(",") if x],
                  repeats=args.repeats, rbps_mb=args.rbps_mb, riops=args.riops,
                  warm=not args.no_warm, warm_steps=args.warm_steps,
                  read_ahead_kb=None if args.read_ahead_kb < 0 else args.read_ahead_kb)
    for line in report(res):
        print(line)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()
