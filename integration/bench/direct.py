"""The driver of direct.sh: reads of an aifs mount's samples straight from the shards
(python/aifs_direct.py), through the FUSE mount and from native ext4, timed, with the aifs
daemon's CPU and the FUSE requests its mount answered over each timed pass. Run by direct.sh (as
root: drop_caches, /proc/PID/stat) with /usr/bin/python3.

usage:
  direct.py verify MOUNT TREE
  direct.py raw HOW ROOT JOBS SEED [MOUNT PID]
  direct.py loader SAMPLES WORKERS RUNS cold|warm MOUNT PID TREE
  direct.py report TSV

verify reads every file of the mount with aifs_direct's Mount.read and the same file of TREE
(the tree the set was packed from) and exits with an error if one has no location (it would be
read through the mount, not directly) or their bytes differ.

raw lists ROOT (untimed: the caller dropped the caches or not; a job lists its dataset before its
first epoch), shuffles the sorted list with SEED and starts JOBS reader processes, reader i
reading items i, i+JOBS, ... of that order whole, as soon as all have started; the time runs from
the first reader's start to the last one's end (each reader takes the clock itself). HOW is
`direct` (aifs_direct.open(ROOT), opened before the readers fork, then Mount.read of each path)
or `open` (open(path, "rb").read()). With MOUNT and PID (the aifs mount and its daemon) it also
counts the daemon's CPU and the mount's requests over that time. Prints: files/s, files, bytes,
daemon clock ticks (utime + stime), READ requests, all requests (the last three "-" without
MOUNT).

loader times RUNS passes of torchvision's ImageFolder through DataLoader (dataloader.py's
transform, batch and loop: SAMPLES samples, WORKERS workers, shuffle seeded with the pass
number) on `direct` (ImageFolder(MOUNT) with aifs_direct.use_direct), `aifs` (ImageFolder(MOUNT))
and `ext4` (ImageFolder(TREE)), the systems taking turns pass by pass, the first of them moving
by one each pass. cold drops the caches before each ImageFolder is built. Prints one line per
pass and system: SYSTEM PASS samples/s samples - daemon-ticks READs requests ("-" for ext4).

report reads the lines direct.sh collected (CASE SYSTEM PASS and then raw's or loader's fields;
and `meta KEY VALUE`, tab-separated) and prints the markdown report: medians over the passes,
ratios as the median of the passes' ratios (pass by pass).
"""

import json
import multiprocessing
import os
import random
import statistics
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
from aifs import direct as aifs_direct  # noqa: E402

HZ = os.sysconf("SC_CLK_TCK")
PASS_LIMIT = 3600  # seconds a raw pass may take before it is given up (a reader killed, say)


class Meter:
    """The aifs daemon's CPU clock ticks and the requests its mount answered between start and
    stop. A read of .aifs/stats makes requests of its own (LOOKUP, READ, ...): the constructor
    reads it twice to count them, and stop leaves them out."""

    def __init__(self, mount, pid):
        self.mount, self.pid = mount, pid
        a = self._requests()
        b = self._requests()
        self.own = (b[0] - a[0], b[1] - a[1])

    def _requests(self):
        """(READs, all requests) so far, from the stats file (its snapshot is taken at LOOKUP)."""
        with open(os.path.join(self.mount, ".aifs", "stats"), "rb") as f:
            s = json.loads(f.read())
        return s["ops"]["read"]["count"], s["requests"]

    def _ticks(self):
        with open(f"/proc/{self.pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return int(fields[11]) + int(fields[12])  # utime, stime: fields 14 and 15 of stat(5)

    def start(self):
        self.r0 = self._requests()
        self.t0 = self._ticks()  # after the stats read: its CPU is not the pass's

    def stop(self):
        """Returns (daemon ticks, READs, requests) since start."""
        ticks = self._ticks() - self.t0
        r1 = self._requests()
        return ticks, r1[0] - self.r0[0] - self.own[0], r1[1] - self.r0[1] - self.own[1]


def listing(root):
    """The files under root, as ImageFolder orders them: directories and names sorted."""
    out = []
    for d, dirs, files in os.walk(root):
        dirs.sort()
        out += [os.path.join(d, f) for f in sorted(files)]
    return out


def read_whole(path):
    with open(path, "rb") as f:
        return f.read()


def verify(mount, tree):
    m = aifs_direct.open(mount)
    paths = listing(mount)
    for p in paths:
        rel = os.path.relpath(p, mount)
        if m.locate(p) is None:
            sys.exit(f"direct.py: {p} has no location: Mount.read would read it through the mount")
        if m.read(p) != read_whole(os.path.join(tree, rel)):
            sys.exit(f"direct.py: {p} read directly differs from {os.path.join(tree, rel)}")
    if len(paths) != len(listing(tree)):
        sys.exit(f"direct.py: {mount} has {len(paths)} files, {tree} {len(listing(tree))}")
    print(f"direct.py: the {len(paths)} files read directly are those of {tree}", file=sys.stderr)


def _reader(read, paths, slot, done, start, end):
    """Reads paths whole once start opens; puts the files and bytes read, and the clock
    (CLOCK_MONOTONIC, the same in every process) when it began and ended, in done[4*slot:]."""
    try:
        start.wait(timeout=600)
        t = time.perf_counter()
        n = size = 0
        for p in paths:
            size += len(read(p))
            n += 1
        done[4 * slot: 4 * slot + 4] = [n, size, t, time.perf_counter()]
        end.wait(timeout=PASS_LIMIT)
    except BaseException:
        end.abort()  # the parent's wait fails rather than hangs
        raise


def raw(how, root, jobs, seed, mount=None, pid=None):
    paths = listing(root)
    random.Random(seed).shuffle(paths)
    if how == "direct":
        read = aifs_direct.open(root).read
    elif how == "open":
        read = read_whole
    else:
        sys.exit(f"direct.py: unknown HOW {how!r}")
    meter = Meter(mount, pid) if mount else None
    ctx = multiprocessing.get_context("fork")
    start, end = ctx.Barrier(jobs + 1), ctx.Barrier(jobs + 1)
    done = ctx.Array("d", 4 * jobs, lock=False)  # files and bytes are exact in a double up to 2^53
    procs = [ctx.Process(target=_reader, args=(read, paths[i::jobs], i, done, start, end)) for i in range(jobs)]
    for p in procs:
        p.start()
    if meter:
        meter.start()
    start.wait(timeout=600)
    try:
        end.wait(timeout=PASS_LIMIT)
    except threading.BrokenBarrierError:
        sys.exit("direct.py: a reader failed")
    figs = meter.stop() if meter else ("-", "-", "-")
    for p in procs:
        p.join()
    # From the first reader's start to the last one's end: the parent, one process among JOBS+1
    # on a few cores, may run well after the barrier opens or the last reader is done.
    secs = max(done[3::4]) - min(done[2::4])
    files, size = int(sum(done[0::4])), int(sum(done[1::4]))
    if files != len(paths):
        sys.exit(f"direct.py: read {files} of {len(paths)} files")
    print(round(files / secs, 1), files, size, *figs)


def loader(samples, workers, runs, state, mount, pid, tree):
    import dataloader  # beside this file: the transform, batch size and timed loop of compare.sh's rows
    from torchvision import datasets

    meter = Meter(mount, pid)
    systems = [("direct", mount), ("aifs", mount), ("ext4", tree)]
    for run in range(runs):
        for name, root in systems[run % 3:] + systems[:run % 3]:
            if state == "cold":
                dataloader.drop_caches()
            ds = datasets.ImageFolder(root, transform=dataloader.TRAIN)
            if name == "direct":
                default = ds.loader
                if aifs_direct.use_direct(ds).loader is default:
                    sys.exit(f"direct.py: use_direct left the loader of {root} as it was: not an aifs mount?")
            if root == mount:
                meter.start()
            n, secs = dataloader.timed_epoch(ds, samples, workers, seed=run)
            figs = meter.stop() if root == mount else ("-", "-", "-")
            print(name, run + 1, round(n / secs, 1), n, "-", *figs, flush=True)


# --- the report ---------------------------------------------------------------------------------


def load(path):
    """Returns meta {KEY: VALUE} and passes {(CASE, SYSTEM): {PASS: fields}}, fields being
    rate, samples, bytes, ticks, reads, requests (None where "-")."""
    meta, passes = {}, {}
    with open(path) as f:
        for line in f:
            if line.startswith("meta\t"):
                _, k, v = line.rstrip("\n").split("\t", 2)
                meta[k] = v
                continue
            case, system, n, *fields = line.split()
            passes.setdefault((case, system), {})[int(n)] = [None if x == "-" else float(x) for x in fields]
    return meta, passes


class Report:
    def __init__(self, meta, passes):
        self.meta, self.passes = meta, passes

    def field(self, case, system, i):
        """Field i of each pass of system in case, by pass."""
        return {n: f[i] for n, f in self.passes.get((case, system), {}).items() if f[i] is not None}

    def median(self, case, system, i=0):
        v = self.field(case, system, i)
        return statistics.median(v.values()) if v else None

    def ratio(self, case, a, b):
        """a's rate over b's in case: the median of the ratios of their passes, pass by pass."""
        ra, rb = self.field(case, a, 0), self.field(case, b, 0)
        paired = [ra[n] / rb[n] for n in ra if n in rb and rb[n] > 0]
        return statistics.median(paired) if paired else None

    def idle_rate(self):
        """The idle daemon's clock ticks a second (meta idle-N over idle_seconds each)."""
        idle = [int(v) for k, v in self.meta.items() if k.startswith("idle-")]
        return sum(idle) / (len(idle) * int(self.meta["idle_seconds"])) if idle else 0.0

    def us_per_sample(self, case, system):
        """The daemon's CPU in µs a sample, median over the passes."""
        ticks, samples = self.field(case, system, 3), self.field(case, system, 1)
        return statistics.median(ticks[n] / HZ * 1e6 / samples[n] for n in ticks) if ticks else None

    def idle_us_per_sample(self, case, system):
        """What the idle daemon spends in the time of system's passes of case, in µs a sample
        (median over the passes)."""
        rate = self.field(case, system, 0)
        return statistics.median(self.idle_rate() / HZ * 1e6 / r for r in rate.values()) if rate else None

    def excess_ticks(self, case, system):
        """The ticks of each pass above what the idle daemon spends in the same time."""
        ticks, samples, rate = (self.field(case, system, i) for i in (3, 1, 0))
        return [ticks[n] - self.idle_rate() * samples[n] / rate[n] for n in ticks]


def fmt(x, digits=0):
    if x is None:
        return "—"
    return f"{x:,.{digits}f}"


def report(path):
    meta, passes = load(path)
    r = Report(meta, passes)
    jobs = meta["JOBS"].split()
    total = int(meta["bytes"])
    for (case, system), ps in passes.items():  # every raw pass read the whole set
        for n, f in ps.items():
            if case.startswith("raw-") and system != "fio" and f[2] != total:
                sys.exit(f"direct.py: pass {n} of {system} in {case} read {f[2]:.0f} bytes, not the set's {total}")
    out = []
    w = out.append
    w(f"# Direct reads (python/aifs_direct.py) against the FUSE mount and native ext4 ({meta['date']})")
    w("")
    w(f"{meta['machine']}; commit {meta['commit']}. {int(meta['FILES']):,} real JPEGs, {total / 1e9:.2f} GB "
      f"(mean {total / int(meta['FILES']) / 1e3:.0f} KB), on one ext4 image on a direct-I/O loop device "
      f"beside their shard set, which aifs mounts. Medians of {meta['RUNS']} passes; ratios are the "
      f"median of the passes' ratios. {meta['seconds']} s in all.")
    w("")
    w("- **direct**: `aifs_direct.Mount.read` of the mount's paths (a stat, answered by the kernel, and "
      "one `os.pread` of the shard file); **aifs**: `open().read()` through the FUSE mount; **ext4**: "
      "`open().read()` of the tree the set was packed from; **fio**: O_DIRECT random reads of "
      f"{int(meta['fio_block']):,} bytes (the mean sample, in 4 KiB blocks), one in flight per job, as many "
      "jobs as readers: the device's bound, run after each cold pass.")
    w("- Cold: every cache dropped before each pass, then the tree listed (untimed). Warm: after one "
      "untimed pass of every system.")
    w("")
    w("## Raw reads: files/s (shuffled, whole files, reader processes)")
    w("")
    w("| readers | cache | direct | aifs | ext4 | fio | direct/ext4 | direct/aifs | aifs/ext4 | direct/fio |")
    w("|---|---|---|---|---|---|---|---|---|---|")
    for state in ("cold", "warm"):
        for j in jobs:
            c = f"raw-{state}-{j}"
            w(f"| {j} | {state} | {fmt(r.median(c, 'direct'))} | {fmt(r.median(c, 'aifs'))} | "
              f"{fmt(r.median(c, 'ext4'))} | {fmt(r.median(c, 'fio'))} | {fmt(r.ratio(c, 'direct', 'ext4'), 2)} | "
              f"{fmt(r.ratio(c, 'direct', 'aifs'), 2)} | {fmt(r.ratio(c, 'aifs', 'ext4'), 2)} | "
              f"{fmt(r.ratio(c, 'direct', 'fio'), 2)} |")
    w("")
    w(f"## ImageFolder + DataLoader: samples/s ({meta['WORKERS']} workers, decode + RandomResizedCrop(224), "
      f"flip, ToTensor, Normalize; {meta['PT_SAMPLES']} samples a pass)")
    w("")
    w("| cache | direct | aifs | ext4 | direct/ext4 | direct/aifs |")
    w("|---|---|---|---|---|---|")
    for state in ("cold", "warm"):
        c = f"loader-{state}"
        w(f"| {state} | {fmt(r.median(c, 'direct'), 1)} | {fmt(r.median(c, 'aifs'), 1)} | "
          f"{fmt(r.median(c, 'ext4'), 1)} | {fmt(r.ratio(c, 'direct', 'ext4'), 2)} | {fmt(r.ratio(c, 'direct', 'aifs'), 2)} |")
    w("")
    w("## The aifs daemon over each pass")
    w("")
    w(f"CPU: its utime + stime (/proc/PID/stat, in clock ticks of {1e6 / HZ:,.0f} µs) over the timed pass, "
      "in µs a sample (medians). Idle: what the daemon spends with nothing read "
      f"({r.idle_rate():.2f} ticks a second, over {meta['idle_seconds']} s before the passes and after them), "
      "in the time the direct pass took, in µs a sample: the direct rows' floor. Requests: what `.aifs/stats` "
      "counted over the pass (medians), READs and all kinds.")
    w("")
    w("| pass | direct µs/sample | idle µs/sample | direct READs | direct requests | aifs µs/sample | aifs READs | aifs requests |")
    w("|---|---|---|---|---|---|---|---|")
    rows = [(f"raw-{s}-{j}", f"raw, {j} reader{'s' if j != '1' else ''}, {s}") for s in ("cold", "warm") for j in jobs]
    rows += [(f"loader-{s}", f"DataLoader, {s}") for s in ("cold", "warm")]
    for c, label in rows:
        w(f"| {label} | {fmt(r.us_per_sample(c, 'direct'), 1)} | {fmt(r.idle_us_per_sample(c, 'direct'), 1)} | "
          f"{fmt(r.median(c, 'direct', 4))} | {fmt(r.median(c, 'direct', 5))} | {fmt(r.us_per_sample(c, 'aifs'), 1)} | "
          f"{fmt(r.median(c, 'aifs', 4))} | {fmt(r.median(c, 'aifs', 5))} |")
    w("")
    w("## The issue's targets")
    w("")
    w("| target | figure | met |")
    w("|---|---|---|")

    def met(ok):  # ratios are judged as shown, to 2 decimals
        return "—" if ok is None else ("yes" if ok else "**no**")

    for j in jobs:
        x = r.ratio(f"raw-cold-{j}", "direct", "ext4")
        w(f"| raw cold reads, {j} reader{'s' if j != '1' else ''}: direct ≥ 1.0× ext4 | {fmt(x, 2)} | "
          f"{met(None if x is None else round(x, 2) >= 1.0)} |")
    for j in jobs:
        x = r.ratio(f"raw-warm-{j}", "direct", "aifs")
        w(f"| raw warm reads, {j} reader{'s' if j != '1' else ''}: direct ≥ 1.5× aifs | {fmt(x, 2)} | "
          f"{met(None if x is None else round(x, 2) >= 1.5)} |")
    excess = [x for c, _ in rows for x in r.excess_ticks(c, "direct")]
    reads = [v for c, _ in rows for v in r.field(c, "direct", 4).values()]
    w("| daemon CPU a sample ≈ 0 for direct: no pass more than 2 ticks above the idle daemon's in its time | "
      f"at most {fmt(max(excess, default=None), 1)} ticks above | {met(None if not excess else max(excess) <= 2)} |")
    w(f"| no READ reaches aifs in a direct pass | at most {fmt(max(reads, default=None))} in a pass | "
      f"{met(None if not reads else max(reads) == 0)} |")
    print("\n".join(out))


def main(argv):
    if len(argv) < 2:
        sys.exit(__doc__)
    cmd, args = argv[1], argv[2:]
    if cmd == "verify" and len(args) == 2:
        verify(*args)
    elif cmd == "raw" and len(args) in (4, 6):
        raw(args[0], args[1], int(args[2]), int(args[3]), *args[4:5], *(int(a) for a in args[5:]))
    elif cmd == "loader" and len(args) == 7:
        loader(int(args[0]), int(args[1]), int(args[2]), args[3], args[4], int(args[5]), args[6])
    elif cmd == "report" and len(args) == 1:
        report(args[0])
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv)
