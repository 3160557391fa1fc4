"""Writes compare.sh's report: OUTDIR/compare.md, OUTDIR/compare.png, OUTDIR/compare-memory.png
and OUTDIR/compare.tsv.

usage: report.py RESULTS.tsv OUTDIR

RESULTS.tsv has one figure per line: CASE, SYSTEM, VALUE, tab-separated; CASE "meta" holds the
run's description (SYSTEM is the key). A figure is a median of passes, and CASE/N holds pass N
of it. A ratio between two systems is the median of their passes' ratios where both have passes
(each pass of each system ran within seconds of the others, so drift of the disk over minutes
cancels), else the ratio of their figures. If OUTDIR already holds a compare.tsv from an
earlier run, the report compares every ratio with that run's before replacing it.

The memory-limited rows (MEMORY: case memory-8 at half the dataset, memory-8-q1 and -q3 at a
quarter and three quarters, each limit in meta) come with, per system: hit-CASE, the median
share of an epoch's bytes that did not reach the disk, and disk-CASE, the bytes an epoch read
from the disk over the dataset's (hit = max(0, 1 - disk)), both with their passes; peak-CASE,
the cgroup's peak memory in bytes; oom-CASE, its OOM kills; hwm-CASE, the FUSE daemon's peak
RSS in bytes; failed-CASE, the epochs that failed, if any. System ext4-subset, in those rows only,
is 'aifs bench --keep-fraction F' on a copy of the tree on the ext4 image (F in meta
keep_fraction_qN): the stable-subset policy done by the reader with fadvise(DONTNEED), the bound of
that page-cache policy at the limit without FUSE's costs; ratio aifs/ext4-subset compares aifs on
ext4 with it. The report tabulates them, and compare-memory.png
plots files/s and hit fraction against the limit beside two models of ext4: every byte that fits
cached (hit fraction h = c, c the limit over the dataset's bytes) and an LRU page cache under
shuffled epochs (h = c²/2), each turned into files/s with ext4's cold and warm epochs at 8
readers, rate(h) = 1 / ((1 - h) / cold + h / warm).

In the cold rows, system fio is fio's O_DIRECT random reads of the mean sample and fio-seq its
sequential O_DIRECT reads, each job its own part of a shard in 4 MiB blocks, in files/s of the
mean sample. aifs-old ("aifs before") is the build OLD_AIFS named, where the run had one.
aifs-noio, in the cold rows and at 1/2, is this commit built with tag aifs_noio (reads skip the
device), read alone after each pass: what aifs's own path costs the CPUs, its bound with an
infinitely fast disk. cpu-CASE is each system's median CPU time per file (the whole machine
busy, every process, over the files read, in µs); meta cpus the machine's CPUs, so that
cpus × 10^6 / cpu-CASE is the files/s at which the CPUs would be busy all the time. At 1/2,
fio-busy-memory-8 (system fio) is the machine's busy CPU time per O_DIRECT random read of the
mean sample by 8 fio jobs with pread, in µs: with aifs-noio's CPU per file and aifs on ext4's disk
share it gives the CPU bound of any aifs at that limit (section "this machine's bound").
"""

import os
import shutil
import statistics
import sys

import matplotlib
import matplotlib.ticker

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

SYSTEMS = [  # column, label
    ("ext4", "ext4"),
    ("ext4-subset", "ext4, stable subset (fadvise)"),
    ("xfs", "XFS"),
    ("aifs-ext4", "aifs on ext4"),
    ("aifs-xfs", "aifs on XFS"),
    ("aifs-kernel", "aifs kernel plane"),
    ("aifs-old", "aifs before"),
    ("squashfuse", "squashfuse"),
    ("fio", "fio O_DIRECT (device)"),
    ("fio-seq", "fio sequential (device)"),
    ("aifs-noio", "aifs, no I/O (CPU bound)"),
]
RATIOS = [  # label, numerator, denominator
    ("aifs/ext4", "aifs-ext4", "ext4"),
    ("aifs/ext4-subset (bound without FUSE)", "aifs-ext4", "ext4-subset"),
    ("aifs/XFS", "aifs-xfs", "xfs"),
    ("kernel plane/ext4", "aifs-kernel", "ext4"),
    ("kernel plane/XFS", "aifs-kernel", "xfs"),
    ("kernel plane/FUSE plane", "aifs-kernel", "aifs-ext4"),
    ("aifs/fio", "aifs-ext4", "fio"),
    ("aifs/fio-seq", "aifs-ext4", "fio-seq"),
    ("aifs/aifs no I/O", "aifs-ext4", "aifs-noio"),
    ("aifs/aifs before", "aifs-ext4", "aifs-old"),
    ("squashfuse/ext4", "squashfuse", "ext4"),
]
MEMORY = [  # case, meta keys of its limit and of ext4-subset's F, the limit's share of the dataset (compare.sh's)
    ("memory-8-q1", "memory_limit_q1", "keep_fraction_q1", "1/4"),
    ("memory-8", "memory_limit", "keep_fraction_q2", "1/2"),
    ("memory-8-q3", "memory_limit_q3", "keep_fraction_q3", "3/4"),
]


def present(figs):
    """The SYSTEMS that have figures in this run."""
    return [(s, label) for s, label in SYSTEMS if any(k[1] == s for k in figs)]


def memory_rows(meta):
    """The memory-limited rows this run has, in order of their limits: case, limit in bytes, c (the
    limit over the dataset's bytes), and the share as a label ("1/4", or c where the 64 MiB floor
    raised the limit above it)."""
    out = []
    for case, key, _, share in MEMORY:
        if key in meta:
            limit, total = int(meta[key]), int(meta["bytes"])
            num, den = (int(x) for x in share.split("/"))
            c = limit / total
            out.append((case, limit, c, share if limit == total * num // den else f"{c:.2f}"))
    return out


def keep_fractions(meta):
    """ext4-subset's --keep-fraction in each memory-limited row that recorded one, by case."""
    return {case: float(meta[key]) for case, _, key, _ in MEMORY if key in meta}


def cases(meta):
    """The throughput rows, in order: case, label, unit (higher is better in all of them)."""
    rows = [(f"cold-{j}", f"cold shuffled epoch, {j} reader{'s' if j != '1' else ''}", "files/s")
            for j in meta["JOBS"].split()]
    rows.append(("warm-8", "warm shuffled epoch, 8 readers", "files/s"))
    if "PY_READERS" in meta:
        rows.append(("python-warm", f"warm shuffled epoch read by Python (open + read), {meta['PY_READERS']} processes",
                     "files/s"))
    rows += [(case, f"shuffled epochs, memory limited to {share} of the dataset, 8 readers", "files/s")
             for case, _, _, share in memory_rows(meta)]
    return rows + [
        ("sorted-1", "sorted scan (validation order), 1 reader", "MB/s"),
        ("pytorch", f"PyTorch DataLoader, {meta['WORKERS']} workers, decode + transform", "samples/s"),
    ]


def load(path):
    meta, figs = {}, {}
    with open(path) as f:
        for line in f:
            case, system, value = line.rstrip("\n").split("\t")
            if case == "meta":
                meta[system] = value
            else:
                figs[(case, system)] = float(value)
    return meta, figs


def ratio(figs, case, a, b):
    """System a's figure over system b's in case: the median of their passes' ratios, pass by
    pass, where both have passes; else the ratio of their figures."""
    paired = [figs[(c, a)] / figs[(c, b)] for c, s in figs
              if s == a and c.startswith(case + "/") and (c, b) in figs]
    return statistics.median(paired) if paired else figs[(case, a)] / figs[(case, b)]


def passes(figs, case, system):
    """How many passes system's figure in case is the median of."""
    return sum(1 for c, s in figs if s == system and c.startswith(case + "/"))


def pass_counts(meta, figs):
    """'N passes' for the throughput rows, naming the rows with another count (warm epochs have
    their own note)."""
    counts = {label: passes(figs, case, "ext4") for case, label, _ in cases(meta)
              if case != "warm-8" and passes(figs, case, "ext4")}
    usual = statistics.mode(counts.values()) if counts else int(meta["RUNS"])
    other = [f"{n} for the {label}" for label, n in counts.items() if n != usual]
    return f"{usual} passes" + (f" ({'; '.join(other)})" if other else "")


def ratios(meta, figs):
    """Every ratio the report gives, by (case, ratio label)."""
    out = {}
    for case, _, _ in cases(meta):
        for label, a, b in RATIOS:
            if (case, a) in figs and (case, b) in figs:
                out[(case, label)] = ratio(figs, case, a, b)
    for system in ("xfs", "aifs-ext4", "squashfuse"):
        if ("imagefolder", system) in figs:
            out[("imagefolder", f"{system} time/ext4")] = ratio(figs, "imagefolder", system, "ext4")
    return out


def fmt(v):
    return f"{v:,.0f}" if v >= 100 else f"{v:.3g}"


def markdown(meta, figs, previous):
    systems = present(figs)
    ratio_cols = [r for r in RATIOS if any(k[1] == r[1] for k in figs) and any(k[1] == r[2] for k in figs)]
    gb = int(meta["bytes"]) / 1e9
    lines = [
        "# aifs against native file systems and the device, side by side",
        "",
        f"Measured by `sudo integration/bench/compare.sh` on {meta['date']} at commit {meta['commit']}, "
        f"in {int(meta['seconds']) // 60} minutes (FILES={meta['FILES']}, JOBS=\"{meta['JOBS']}\", RUNS={meta['RUNS']}, "
        f"PT_SAMPLES={meta['PT_SAMPLES']}, WORKERS={meta['WORKERS']}, NAMES={meta['NAMES']}).",
        "",
        f"**Machine:** {meta['machine']}.",
        "",
        f"**Dataset:** {int(meta['FILES']):,} JPEGs, {gb:.2f} GB (mean {int(meta['bytes']) / int(meta['FILES']) / 1000:.0f} KB, "
        "log-normal sizes). ext4 and XFS are image files on the same disk, loop-mounted with direct I/O so the "
        "host does not cache them; each holds the tree and its aifs shard set"
        + (", and the ext4 image also holds the squashfs image that squashfuse mounts"
           if any(k[1] == "squashfuse" for k in figs) else "")
        + (", and a second copy of the tree for ext4, stable subset" if any(k[1] == "ext4-subset" for k in figs) else "")
        + ". aifs runs with its defaults. Each figure is the median of "
        f"{pass_counts(meta, figs)}, the systems interleaved pass by pass; a ratio is the median of the passes' "
        "ratios, pass by pass (drift of the disk over minutes cancels). Every aifs pass served the same bytes "
        "as ext4 (`aifs bench` digests)"
        + (", but aifs, no I/O, a bound that serves stale bytes" if any(k[1] == "aifs-noio" for k in figs) else "") + "."
        + (f" \"aifs before\" is `{meta['old_aifs']}` mounting the ext4 image's shard set "
           "(`aifs bench`, the reader, is this commit's)." if "old_aifs" in meta else ""),
        "",
    ]
    oom = oom_lines(meta, figs)
    if oom:
        lines += ["**OOM kills in the memory-limited epochs:** " + "; ".join(oom) + ". See "
                  "[Memory limited](#memory-limited-what-stays-cached).", ""]
    lines += [
        "## Reading the dataset",
        "",
        "| | unit | " + " | ".join(label for _, label in systems) + " | " + " | ".join(r[0] for r in ratio_cols) + " |",
        "|---|---|" + "---|" * (len(systems) + len(ratio_cols)),
    ]
    rs = ratios(meta, figs)
    for case, label, unit in cases(meta):
        cells = [fmt(figs[(case, s)]) if (case, s) in figs else "—" for s, _ in systems]
        rcells = [f"**{rs[(case, r[0])]:.2f}**" if (case, r[0]) in rs else "—" for r in ratio_cols]
        lines.append(f"| {label} | {unit} | " + " | ".join(cells) + " | " + " | ".join(rcells) + " |")
    lines += [
        "",
        "- **cold**: caches dropped, then the tree listed again (untimed), as a job builds its ImageFolder "
        "before its first epoch; each reader opens, reads to the end and closes one file at a time. "
        f"fio reads {int(meta['fio_block']) // 1024} KiB blocks (the mean sample, rounded up to 4 KiB) at random "
        "from a shard with O_DIRECT, at the same concurrency, one fio run after each pass of the systems: "
        "the device's ceiling for random samples."
        + (" fio sequential: as many fio jobs as readers, each reading its own part of the shard once in 4 MiB "
           "blocks with O_DIRECT, one in flight each, right after the random reads; its MB/s "
           f"({seq_mbps(meta, figs)}) over the mean sample's bytes: the bound of a system that reads each byte "
           "of the shards once, in large reads." if any(k[1] == "fio-seq" for k in figs) else "")
        + (" squashfuse, the slowest, reads first in a pass, so that fio follows aifs within seconds."
           if any(k[1] == "squashfuse" for k in figs) else "")
        + (" **aifs, no I/O (CPU bound)**: the same epoch, after fio, on aifs built with tag `aifs_noio`, whose "
           "reads skip the device (see [CPU per file](#cpu-per-file))." if any(k[1] == "aifs-noio" for k in figs) else ""),
        f"- **warm**: after two epochs, with nothing dropped; the median of {passes(figs, 'warm-8', 'ext4')} epochs, as each "
        "takes a fraction of a second.",
    ]
    if ("python-warm", "ext4") in figs:
        lines.append(
            f"- **warm, read by Python**: `pyread.py`, {meta['PY_READERS']} processes each opening and reading to the end "
            "one file at a time with Python's `open()` and `read()`, as torchvision's `pil_loader` does (on Python "
            "before 3.14 each `open()` also sends `ioctl(TCGETS)`, which FUSE passes to the daemon), one shuffled "
            f"order per pass, after one untimed epoch; the median of {passes(figs, 'python-warm', 'ext4')} passes.")
    if any(k[1] == "aifs-kernel" for k in figs):
        lines.append(
            "- **aifs kernel plane**: `aifs mount -o data=kernel` of the ext4 image's shard set: the kernel's EROFS "
            "serves the files from the shards (`directio`), the daemon only reads ahead and drops (docs/kernel.md); "
            "like every aifs row it reads with its defaults and no plan.")
    lines += [
        "- **memory limited**: each system's readers and its FUSE daemon in one memory cgroup limited to "
        + and_list([mb(limit) for _, limit, _, _ in memory_rows(meta)]) + " MB ("
        + and_list([share for *_, share in memory_rows(meta)]) + " of the dataset), epochs 2 onward (epoch 1 fills the cache, untimed); the systems take turns epoch by "
        "epoch" + ("; squashfuse only at 1/2" if any(k[1] == "squashfuse" for k in figs) else "") + ".",
    ]
    if any(k[1] == "ext4-subset" for k in figs):
        lines.append(
            "- **ext4, stable subset (fadvise)**, memory limited only: `aifs bench --keep-fraction F` reading a copy of "
            "the tree on the ext4 image, which after reading each file outside a fixed subset of F of the files (by a "
            "hash of its path: the same files every epoch) drops its pages with posix_fadvise(DONTNEED). It is the "
            "stable-subset policy aifs follows, done by the reader on ext4: the bound of that page-cache policy at "
            "the limit without FUSE's costs; **aifs/ext4-subset (bound without FUSE)** is aifs on ext4 against it. "
            "F = (limit − limit/16 − 32 MiB) / the dataset's bytes" + keep_list(meta) + ".")
    lines += [
        "- **sorted scan**: caches dropped and the tree listed, then every file in ImageFolder's sorted order; "
        "fio reads the first shard (1 GiB at most) once from start to end in 4 MiB blocks with O_DIRECT, 8 in flight (32 MiB, "
        "the window aifs's read-ahead grows to), three times after each pass; a pass's figure is the median "
        "of the three.",
        "- **PyTorch**: torchvision `ImageFolder` with RandomResizedCrop(224), RandomHorizontalFlip, ToTensor "
        f"and Normalize, `DataLoader(batch_size=32, shuffle=True, num_workers={meta['WORKERS']})`, "
        f"{int(meta['PT_SAMPLES']):,} samples per pass, caches dropped before each "
        "(`integration/bench/dataloader.py`).",
    ]
    lines += cpu_section(meta, figs)
    lines += bound_section(meta, figs)
    lines += memory_section(meta, figs)
    if ("imagefolder", "ext4") in figs:
        nsys = [(s, label) for s, label in systems if ("imagefolder", s) in figs]
        lines += [
            "",
            f"## ImageFolder over {int(meta['NAMES']):,} names in 1,000 classes",
            "",
            "| | " + " | ".join(label for _, label in nsys) + " |",
            "|---|" + "---|" * len(nsys),
            "| construction, warm (s) | " + " | ".join(f"{figs[('imagefolder', s)]:.2f}" for s, _ in nsys) + " |",
            "| time relative to ext4 | " + " | ".join(
                f"**{ratio(figs, 'imagefolder', s, 'ext4'):.2f}**" for s, _ in nsys) + " |",
            "| FUSE daemon RSS after the scans (MiB) | " + " | ".join(
                f"{figs[('rss', s)]:.0f}" if ("rss", s) in figs else "—" for s, _ in nsys) + " |",
            "",
            f"The aifs index of these names is {int(meta['index_bytes']) / 2**20:.1f} MiB. Warm: each system was "
            f"scanned once, untimed, before {passes(figs, 'imagefolder', 'ext4')} timed scans, the systems in turn; "
            "a time is their median.",
        ]
    lines += ["", "![each system relative to ext4](compare.png)", ""]
    settings = ("FILES", "JOBS", "RUNS", "PT_SAMPLES", "WORKERS", "NAMES")
    if previous and any(previous[0].get(k) != meta[k] for k in settings):
        lines += ["The run before this one in this folder had other settings; it is not compared.", ""]
    elif previous:
        pmeta, pfigs = previous
        before, now = ratios(pmeta, pfigs), rs
        common = [k for k in now if k in before]
        if common:
            changes = {k: now[k] / before[k] - 1 for k in common}
            worst = max(common, key=lambda k: abs(changes[k]))
            lines += [
                "## Repeatability",
                "",
                f"Against the run before this one ({pmeta['date']}, commit {pmeta['commit']}), {len(common)} ratios "
                f"moved by a median of {sorted(abs(c) for c in changes.values())[len(changes) // 2] * 100:.0f}% and at most "
                f"{abs(changes[worst]) * 100:.0f}% ({worst[1]}, {worst[0]}).",
                "",
                "| case | ratio | before | now | change |",
                "|---|---|---|---|---|",
            ]
            lines += [f"| {k[0]} | {k[1]} | {before[k]:.2f} | {now[k]:.2f} | {changes[k] * 100:+.0f}% |" for k in common]
            fio = [k for k in figs if k[1] in ("fio", "fio-seq") and "/" not in k[0] and k in pfigs]
            lines += [f"| {k[0]} | {'fio sequential' if k[1] == 'fio-seq' else 'fio'} alone (the device; not a ratio) | {fmt(pfigs[k])} | {fmt(figs[k])} | "
                      f"{(figs[k] / pfigs[k] - 1) * 100:+.0f}% |" for k in fio]
            lines.append("")
    return "\n".join(lines)


def seq_mbps(meta, figs):
    """fio sequential's MB/s in each cold row, from its files/s of the mean sample."""
    mean = int(meta["bytes"]) / int(meta["FILES"])
    return ", ".join(f"{figs[(case, 'fio-seq')] * mean / 1e6:,.0f} MB/s at {case.split('-')[1]} job"
                     + ("s" if case != "cold-1" else "")
                     for case, _, _ in cases(meta) if (case, "fio-seq") in figs)


def keep_list(meta):
    """': F at 1/4, ...' for the memory-limited rows that recorded ext4-subset's F, or ''."""
    kf = keep_fractions(meta)
    fs = [f"{kf[case]:.2f} at {share}" for case, _, _, share in memory_rows(meta) if case in kf]
    return ": " + and_list(fs) if fs else ""


def and_list(words):
    return ", ".join(words[:-1]) + " and " + words[-1] if len(words) > 1 else "".join(words)


def mb(v):
    return f"{v / 1e6:,.0f}"


def oom_lines(meta, figs):
    """One phrase for each memory-limited row and system whose cgroup saw an OOM kill or an
    epoch fail."""
    out = []
    labels = dict(SYSTEMS)
    for case, _, _, share in memory_rows(meta):
        for s, label in SYSTEMS:
            kills, failed = figs.get((f"oom-{case}", s), 0), figs.get((f"failed-{case}", s), 0)
            if kills or failed:
                out.append(f"{labels[s]} at {share} of the dataset, {kills:.0f} OOM kill{'s' if kills != 1 else ''}"
                           + (f", {failed:.0f} of {int(meta['RUNS']) + 1} epochs failed" if failed else ""))
    return out


def memory_section(meta, figs):
    """The hit fractions and memory use of the memory-limited rows."""
    rows = memory_rows(meta)
    systems = [(s, label) for s, label in SYSTEMS if any((f"hit-{case}", s) in figs for case, *_ in rows)]
    if not systems:
        return []
    lines = [
        "",
        "## Memory limited: what stays cached",
        "",
        "Hit fraction: the share of a timed epoch's bytes served without reaching the disk, 1 − (bytes read from "
        "the loop device of the image the system reads, during the epoch) / (the dataset's bytes), 0 at least; "
        "the median of the epochs. The loop device counts every read, metadata and read-ahead too, so a hit "
        "fraction is a floor; where a system read more than the dataset's bytes in an epoch, the cell says how "
        "much more (\"read 1.10×\"). Beside them, for c = the limit over the dataset's bytes, the hit fraction of a "
        "cache that keeps c of the dataset (ideal, h = c) and of an LRU page cache under shuffled epochs "
        "(h = c²/2)."
        + (" ext4, stable subset (fadvise) keeps a fixed F of the files cached, so its ideal is h = F, not c"
           + keep_list(meta) + "." if any(s == "ext4-subset" for s, _ in systems) else ""),
        "",
        "| limit | ideal, c | LRU, c²/2 | " + " | ".join(label for _, label in systems) + " |",
        "|---|---|---|" + "---|" * len(systems),
    ]
    for case, limit, c, share in rows:
        cells = [hit_cell(figs, case, s) for s, _ in systems]
        lines.append(f"| {mb(limit)} MB ({share}) | {c:.2f} | {c * c / 2:.2f} | " + " | ".join(cells) + " |")
    lines += [
        "",
        "![files/s and hit fraction against the memory limit](compare-memory.png)",
        "",
        "Memory use against the limit: each cgroup's peak (its processes and the page cache charged to it), the "
        "FUSE daemon's peak RSS (VmHWM, aifs's sample cache included) and the OOM kills in the cgroup.",
        "",
        "| limit | system | cgroup peak (MB) | peak/limit | daemon peak RSS (MB) | OOM kills |",
        "|---|---|---|---|---|---|",
    ]
    for case, limit, c, share in rows:
        for s, label in SYSTEMS:
            if (f"oom-{case}", s) not in figs:
                continue
            peak = figs.get((f"peak-{case}", s))
            hwm = figs.get((f"hwm-{case}", s))
            kills, failed = figs[(f"oom-{case}", s)], figs.get((f"failed-{case}", s), 0)
            oom = f"**{kills:.0f}**" if kills else "0"
            if failed:
                oom += f" (**{failed:.0f} of {int(meta['RUNS']) + 1} epochs failed**)"
            lines.append(f"| {mb(limit)} MB ({share}) | {label} | {mb(peak) if peak else '—'} | "
                         f"{f'{peak / limit:.2f}' if peak else '—'} | {mb(hwm) if hwm else '—'} | {oom} |")
    return lines


def cpu_section(meta, figs):
    """Each system's CPU time per file in the rows that recorded it, and the files/s at which
    that would keep every CPU busy."""
    rows = [(case, label) for case, label, _ in cases(meta) if any(k[0] == f"cpu-{case}" for k in figs)]
    if not rows or "cpus" not in meta:
        return []
    cpus = int(meta["cpus"])
    systems = [(s, label) for s, label in SYSTEMS if any((f"cpu-{case}", s) in figs for case, _ in rows)]
    lines = [
        "",
        "## CPU per file",
        "",
        f"The machine's busy CPU time during an epoch (all {cpus} CPUs, every process and the kernel's work: "
        "/proc/stat's user, nice, system, irq and softirq; not idle, iowait or steal) over the files read, in µs, "
        f"the median of the passes; and in brackets {cpus} CPUs over it: the files/s at which that work would keep "
        "every CPU busy, the system's CPU bound on this machine. The reader's own work (open, read, close, a "
        "digest of each file) is in every column. **aifs, no I/O (CPU bound)** is aifs built with tag "
        "`aifs_noio`, whose reads skip the device and serve stale bytes (read alone after each pass, its digest "
        "unchecked): aifs's FUSE path with an infinitely fast disk.",
        "",
        "| | " + " | ".join(label for _, label in systems) + " |",
        "|---|" + "---|" * len(systems),
    ]
    for case, label in rows:
        cells = []
        for s, _ in systems:
            v = figs.get((f"cpu-{case}", s))
            cells.append(f"{v:,.0f} ({cpus * 1e6 / v:,.0f})" if v else "—")
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return lines


def bound_section(meta, figs):
    """At 1/2 of the dataset (memory-8): the files/s of an aifs whose own path costs the CPUs what
    aifs-noio's does there and whose reads from the disk each cost what fio's do (fio-busy-memory-8),
    reading the share of the dataset aifs on ext4 read (disk-memory-8), with every CPU busy all the
    time; beside ext4, XFS, aifs and aifs-noio."""
    case = "memory-8"
    need = [(f"cpu-{case}", "aifs-noio"), (f"fio-busy-{case}", "fio"), (f"disk-{case}", "aifs-ext4"),
            (case, "ext4"), (case, "aifs-ext4"), (case, "aifs-noio")]
    if "cpus" not in meta or any(k not in figs for k in need):
        return []
    cpus = int(meta["cpus"])
    noio, fio = figs[(f"cpu-{case}", "aifs-noio")], figs[(f"fio-busy-{case}", "fio")]
    disk = min(1.0, figs[(f"disk-{case}", "aifs-ext4")])
    per_file = noio + disk * fio
    bound = cpus * 1e6 / per_file
    busy = figs[(case, "aifs-noio")] * noio / (cpus * 1e6)
    has_xfs = (case, "xfs") in figs
    bases = ["ext4"] + (["xfs"] if has_xfs else [])
    # A system against ext4 and XFS pass by pass, as in the main table; the bound against medians.
    rows = [(label, figs[(case, s)], [ratio(figs, case, s, b) for b in bases]) for s, label in SYSTEMS
            if s in ("ext4", "xfs", "aifs-ext4", "aifs-xfs", "aifs-noio") and (case, s) in figs]
    rows.append(("bound: aifs, no I/O's CPU + aifs's disk reads at fio's CPU, every CPU busy", bound,
                 [bound / figs[(case, b)] for b in bases]))
    lines = [
        "",
        "## Memory limited to 1/2: this machine's bound",
        "",
        f"aifs, no I/O costs {noio:,.0f} µs of busy CPU a file at this limit, with no disk. aifs on ext4 read "
        f"{disk:.2f} of the dataset's bytes from the disk an epoch, in reads of one sample; fio's O_DIRECT random "
        f"reads of the mean sample ({int(meta['fio_block']) // 1024} KiB, 8 jobs with pread, 3 s after each round of "
        f"timed epochs) cost {fio:,.0f} µs of the whole machine's busy CPU a read (fio, the loop device's worker and "
        f"the interrupts). An aifs with both costs needs {noio:,.0f} + {disk:.2f} × {fio:,.0f} = {per_file:,.0f} µs "
        f"a file: {cpus} CPUs always busy serve {bound:,.0f} files/s. That is the CPU bound of any aifs at this "
        f"limit on this machine; aifs, no I/O itself kept the CPUs {busy * 100:.0f}% busy.",
        "",
        "| | files/s | /ext4 |" + (" /XFS |" if has_xfs else "") + " /bound |",
        "|---|---|---|" + ("---|" if has_xfs else "") + "---|",
    ]
    for label, v, rs in rows:
        lines.append(f"| {label} | {v:,.0f} | " + " | ".join(f"{r:.2f}" for r in rs) + f" | {v / bound:.2f} |")
    return lines


def hit_cell(figs, case, system):
    """system's hit fraction in case, with the bytes it read from the disk over the dataset's
    where that is more than 1 (the hit fraction, 0, says less)."""
    if (f"hit-{case}", system) not in figs:
        return "—"
    disk = figs.get((f"disk-{case}", system), 0)
    return f"{figs[(f'hit-{case}', system)]:.2f}" + (f" (read {disk:.2f}×)" if disk > 1 else "")


def memory_model(meta, figs):
    """ext4's files/s as a function of the hit fraction h, from its cold and warm epochs at 8
    readers (None without them): each sample read costs 1/cold s from the disk, 1/warm from the
    page cache."""
    if ("cold-8", "ext4") not in figs or ("warm-8", "ext4") not in figs:
        return None
    cold, warm = figs[("cold-8", "ext4")], figs[("warm-8", "ext4")]
    return lambda h: 1 / ((1 - h) / cold + h / warm)


def memory_chart(meta, figs, path):
    """files/s (log scale) and hit fraction against c, each system's memory-limited rows (with its
    warm epochs at c = 1), beside the ideal and LRU models."""
    rows = memory_rows(meta)
    systems = [(s, label) for s, label in SYSTEMS
               if s != "aifs-noio" and any((case, s) in figs for case, *_ in rows)]  # a bound, at 1/2 only
    fig, (ax, ax2) = plt.subplots(1, 2, figsize=(13, 5.5))
    cs = [i / 100 for i in range(101)]
    model = memory_model(meta, figs)
    if model:
        ax.plot(cs, [model(c) for c in cs], "k--", linewidth=1, label="ext4 model, ideal (h = c)")
        ax.plot(cs, [model(c * c / 2) for c in cs], "k:", linewidth=1, label="ext4 model, LRU (h = c²/2)")
    for s, label in systems:
        pts = [(c, figs[(case, s)]) for case, _, c, _ in rows if (case, s) in figs]
        if ("warm-8", s) in figs:
            pts.append((1.0, figs[("warm-8", s)]))
        line, = ax.plot(*zip(*pts), "o-", label=label)
        hits = [(c, figs[(f"hit-{case}", s)]) for case, _, c, _ in rows if (f"hit-{case}", s) in figs]
        if hits:
            ax2.plot(*zip(*hits), "o-", color=line.get_color(), label=label)
    ax.set_yscale("log")
    ax.yaxis.set_minor_locator(matplotlib.ticker.LogLocator(subs=(2, 5)))
    for axis in (ax.yaxis.set_major_formatter, ax.yaxis.set_minor_formatter):
        axis(matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:,.0f}"))
    ax.set_xlabel("memory limit / dataset bytes (c; 1 = the warm epochs, nothing limited)")
    ax.set_ylabel("files/s, 8 readers (log scale)")
    ax.legend(fontsize=8)
    ax2.plot(cs, cs, "k--", linewidth=1, label="ideal, h = c")
    ax2.plot(cs, [c * c / 2 for c in cs], "k:", linewidth=1, label="LRU, h = c²/2")
    ax2.set_xlim(0, 1)
    ax2.set_ylim(0, 1)
    ax2.set_xlabel("memory limit / dataset bytes (c)")
    ax2.set_ylabel("hit fraction: epoch bytes not read from the disk")
    ax2.legend(fontsize=8)
    for a in (ax, ax2):
        a.grid(True, alpha=0.3)
    fig.suptitle(f"Memory-limited shuffled epochs, {int(meta['FILES']):,} JPEGs, "
                 f"{int(meta['bytes']) / 1e9:.2f} GB; {meta['machine']}", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def chart(meta, figs, path):
    rows = [(case, label) for case, label, _ in cases(meta) if (case, "ext4") in figs]
    systems = [(s, label) for s, label in present(figs) if s != "ext4"]
    has_names = ("imagefolder", "ext4") in figs
    fig, axes = plt.subplots(1, 2 if has_names else 1, figsize=(14 if has_names else 10, 7),
                             gridspec_kw={"width_ratios": [3, 1]} if has_names else None, squeeze=False)
    ax = axes[0][0]
    height = 0.8 / len(systems)
    for n, (s, label) in enumerate(systems):
        ys, xs = [], []
        for r, (case, _) in enumerate(rows):
            if (case, s) in figs:
                ys.append(r + n * height)
                xs.append(ratio(figs, case, s, "ext4"))
        ax.barh(ys, xs, height=height, label=label)
        for y, x in zip(ys, xs):
            ax.text(x, y, f" {x:.2f}", va="center", fontsize=7)
    ax.set_xscale("log")
    ax.xaxis.set_major_locator(matplotlib.ticker.FixedLocator([0.125, 0.25, 0.5, 1, 2, 4, 8, 16, 32]))
    ax.xaxis.set_major_formatter(matplotlib.ticker.FormatStrFormatter("%g"))
    ax.xaxis.set_minor_locator(matplotlib.ticker.NullLocator())
    ax.axvline(1, color="black", linewidth=0.8)
    ax.set_yticks([r + 0.4 - height / 2 for r in range(len(rows))])
    ax.set_yticklabels([label for _, label in rows], fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("throughput relative to ext4 (log scale; higher is better)")
    ax.legend(fontsize=8, loc="lower right")
    if has_names:
        ax2 = axes[0][1]
        nsys = [(s, label) for s, label in SYSTEMS if ("imagefolder", s) in figs]
        xs = [ratio(figs, "imagefolder", s, "ext4") for s, _ in nsys]
        ax2.barh(range(len(nsys)), xs, color="gray")
        for y, x in enumerate(xs):
            ax2.text(x, y, f" {x:.2f}", va="center", fontsize=8)
        ax2.set_yticks(range(len(nsys)))
        ax2.set_yticklabels([label for _, label in nsys], fontsize=8)
        ax2.invert_yaxis()
        ax2.set_xlabel("ImageFolder time / ext4\n(lower is better)")
    fig.suptitle(f"{int(meta['FILES']):,} JPEGs; {meta['machine']}", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def main(argv):
    if len(argv) != 3:
        sys.exit(__doc__)
    results, outdir = argv[1], argv[2]
    meta, figs = load(results)
    prev_path = os.path.join(outdir, "compare.tsv")
    previous = load(prev_path) if os.path.exists(prev_path) else None
    with open(os.path.join(outdir, "compare.md"), "w") as f:
        f.write(markdown(meta, figs, previous))
    chart(meta, figs, os.path.join(outdir, "compare.png"))
    written = ["compare.md", "compare.png"]
    if any((case, "ext4") in figs for case, *_ in memory_rows(meta)):
        memory_chart(meta, figs, os.path.join(outdir, "compare-memory.png"))
        written.append("compare-memory.png")
    shutil.copyfile(results, prev_path)
    print(f"wrote {outdir}/{', '.join(written)} and compare.tsv")


if __name__ == "__main__":
    main(sys.argv)
