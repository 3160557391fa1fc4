"""Writes compare.sh's report: OUTDIR/compare.md, OUTDIR/compare.png and OUTDIR/compare.tsv.

usage: report.py RESULTS.tsv OUTDIR

RESULTS.tsv has one figure per line: CASE, SYSTEM, VALUE, tab-separated; CASE "meta" holds the
run's description (SYSTEM is the key). A figure is a median of passes, and CASE/N holds pass N
of it. A ratio between two systems is the median of their passes' ratios where both have passes
(each pass of each system ran within seconds of the others, so drift of the disk over minutes
cancels), else the ratio of their figures. If OUTDIR already holds a compare.tsv from an
earlier run, the report compares every ratio with that run's before replacing it.
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
    ("xfs", "XFS"),
    ("aifs-ext4", "aifs on ext4"),
    ("aifs-xfs", "aifs on XFS"),
    ("squashfuse", "squashfuse"),
    ("fio", "fio O_DIRECT (device)"),
]
RATIOS = [  # label, numerator, denominator
    ("aifs/ext4", "aifs-ext4", "ext4"),
    ("aifs/XFS", "aifs-xfs", "xfs"),
    ("aifs/fio", "aifs-ext4", "fio"),
    ("squashfuse/ext4", "squashfuse", "ext4"),
]


def present(figs):
    """The SYSTEMS that have figures in this run."""
    return [(s, label) for s, label in SYSTEMS if any(k[1] == s for k in figs)]


def cases(meta):
    """The throughput rows, in order: case, label, unit (higher is better in all of them)."""
    rows = [(f"cold-{j}", f"cold shuffled epoch, {j} reader{'s' if j != '1' else ''}", "files/s")
            for j in meta["JOBS"].split()]
    return rows + [
        ("warm-8", "warm shuffled epoch, 8 readers", "files/s"),
        ("memory-8", "shuffled epochs, memory limited to half the dataset, 8 readers", "files/s"),
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
           if any(k[1] == "squashfuse" for k in figs) else "") + ". aifs runs with its defaults. Each figure is the median of "
        f"{pass_counts(meta, figs)}, the systems interleaved pass by pass; a ratio is the median of the passes' "
        "ratios, pass by pass (drift of the disk over minutes cancels). Every aifs pass served the same bytes "
        "as ext4 (`aifs bench` digests).",
        "",
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
        + (" squashfuse, the slowest, reads first in a pass, so that fio follows aifs within seconds."
           if any(k[1] == "squashfuse" for k in figs) else ""),
        f"- **warm**: after two epochs, with nothing dropped; the median of {passes(figs, 'warm-8', 'ext4')} epochs, as each "
        "takes a fraction of a second.",
        "- **memory limited**: each system's readers and its FUSE daemon in one memory cgroup limited to half "
        f"the dataset ({int(meta['memory_limit']) / 1e6:,.0f} MB), epochs 2 onward; the systems take turns epoch by epoch.",
        "- **sorted scan**: caches dropped and the tree listed, then every file in ImageFolder's sorted order; "
        "fio reads the first shard (1 GiB at most) once from start to end in 4 MiB blocks with O_DIRECT, 8 in flight (32 MiB, "
        "the window aifs's read-ahead grows to), three times after each pass; a pass's figure is the median "
        "of the three.",
        "- **PyTorch**: torchvision `ImageFolder` with RandomResizedCrop(224), RandomHorizontalFlip, ToTensor "
        f"and Normalize, `DataLoader(batch_size=32, shuffle=True, num_workers={meta['WORKERS']})`, "
        f"{int(meta['PT_SAMPLES']):,} samples per pass, caches dropped before each "
        "(`integration/bench/dataloader.py`).",
    ]
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
            fio = [k for k in figs if k[1] == "fio" and "/" not in k[0] and k in pfigs]
            lines += [f"| {k[0]} | fio alone (the device; not a ratio) | {fmt(pfigs[k])} | {fmt(figs[k])} | "
                      f"{(figs[k] / pfigs[k] - 1) * 100:+.0f}% |" for k in fio]
            lines.append("")
    return "\n".join(lines)


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
    shutil.copyfile(results, prev_path)
    print(f"wrote {outdir}/compare.md, compare.png and compare.tsv")


if __name__ == "__main__":
    main(sys.argv)
