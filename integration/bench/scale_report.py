"""scale_report.py RESULTS OUT — the report of scale.sh: OUT/scale.md from the passes in RESULTS
(one file a figure, a value a line; meta: KEY, tab, value) and OUT/scale.tsv (every figure and
its passes). A figure is the median of its passes."""

import os
import statistics
import sys


def load(res):
    figs, meta = {}, {}
    for name in sorted(os.listdir(res)):
        with open(os.path.join(res, name)) as f:
            if name == "meta":
                for line in f:
                    k, _, v = line.rstrip("\n").partition("\t")
                    meta[k] = v
            else:
                figs[name] = [float(x) for x in f.read().split()]
    return figs, meta


def main(res, out):
    figs, meta = load(res)

    def med(key):
        v = figs.get(key)
        return statistics.median(v) if v else None

    def fmt(v, unit=""):
        if v is None:
            return "–"
        if unit == "MiB":
            return f"{v / 2**20:,.0f} MiB"
        if unit == "MB":
            return f"{v / 1e6:,.1f} MB"
        if unit == "s":
            return f"{v:.3f} s" if v < 10 else f"{v:,.1f} s"
        if unit == "/s":
            return f"{v / 1e6:.2f} M/s"
        return f"{v:,.0f}"

    def ratio(a, b):
        return f"{a / b:.2f}×" if a is not None and b else "–"

    tree = int(meta.get("TREE", "0"))
    lines = [
        "# An index at 100 M samples: mount, memory, lookups",
        "",
        "`sudo integration/bench/scale.sh` (discussion: docs/scale.md). Medians of the passes; "
        "every pass in scale.tsv.",
        "",
        f"- machine: {meta.get('machine')}",
        f"- date: {meta.get('date')}, commit {meta.get('commit')}, load before the run {meta.get('load')}",
        f"- settings: TREE={meta.get('TREE')} BASE={meta.get('BASE')} SIZES=\"{meta.get('SIZES')}\" "
        f"BIGDIR={meta.get('BIGDIR')} RUNS={meta.get('RUNS')}; {meta.get('seconds')} s",
    ]
    if meta.get("NOTE"):
        lines.append(f"- note: {meta['NOTE']}")
    lines += [
        "",
        f"## Before and after index version 3: a tree of {tree:,} files in 1,000 directories",
        "",
        f"The same tree packed by the aifs of {meta.get('BASE')} (index version 1, read, checked and "
        "its lookup table built at mount) and by this checkout's (version 3, read and checked block "
        "by block on first use); the two mounted in turn.",
        "",
        "| | before | now | now / before |",
        "|---|---|---|---|",
    ]
    rows = [
        ("index file", "index_bytes.tree.{}", "MB"),
        ("pack: seconds", "secs.pack.{}", "s"),
        ("pack: peak RSS", "peak_rss.pack.{}", "MiB"),
        ("mount to live, cold caches", "mount_cold.tree.{}", "s"),
        ("mount to live, index in the page cache", "mount_warm.tree.{}", "s"),
        ("daemon RSS after mount", "rss_mount.tree.{}", "MiB"),
        ("listing every directory", "list.tree.{}", "s"),
        ("daemon RSS after the listing", "rss_list.tree.{}", "MiB"),
        ("lookups on one core (BenchmarkIndexLookup)", "lookups.tree.{}", "/s"),
    ]
    for label, key, unit in rows:
        b, n = med(key.format("base")), med(key.format("now"))
        lines.append(f"| {label} | {fmt(b, unit)} | {fmt(n, unit)} | {ratio(n, b)} |")
    pb, pn = med("peak_rss.pack.base"), med("peak_rss.pack.now")
    if pb and pn and tree:
        lines += ["", f"Pack's peak RSS per file: {pb / tree:.0f} bytes before, {pn / tree:.0f} now."]

    sizes = [s.split(":")[0] for s in meta.get("SIZES", "").split()]
    lines += [
        "",
        "## At scale (integration/genindex: ImageNet-like names, 1,000 samples a directory)",
        "",
        "| samples | directories | index file | mount, cold | mount, warm | RSS after mount | "
        "RSS after listing | target 1.1 × index + 100 MB | listing | lookups, cold | lookups, warm |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for n in sizes:
        idx = med(f"index_bytes.{n}")
        bound = 1.1 * idx + 100e6 if idx else None
        lines.append(
            f"| {int(n):,} | {fmt(med(f'dirs.{n}'))} | {fmt(idx, 'MB')} | {fmt(med(f'mount_cold.{n}'), 's')} | "
            f"{fmt(med(f'mount_warm.{n}'), 's')} | {fmt(med(f'rss_mount.{n}'), 'MiB')} | "
            f"{fmt(med(f'rss_list.{n}'), 'MiB')} | {fmt(bound, 'MiB')} | {fmt(med(f'list.{n}'), 's')} | "
            f"{fmt(med(f'cold_lookups_per_s.{n}'), '/s')} | {fmt(med(f'warm_lookups_per_s.{n}'), '/s')} |"
        )
    big = int(meta.get("BIGDIR", "0"))
    a, e = med("scandir.aifs"), med("scandir.ext4")
    lines += [
        "",
        f"## One directory of {big:,} entries",
        "",
        "| | aifs | ext4 | aifs / ext4 |",
        "|---|---|---|---|",
        f"| os.scandir, cold caches | {fmt(a, 's')} | {fmt(e, 's')} | {ratio(a, e)} time |",
        "",
        f"`aifs ls SET DIR` of it: peak RSS {fmt(med('peak_rss.ls'), 'MiB')}, {fmt(med('secs.ls'), 's')}; "
        f"`aifs verify` of the set (1 KiB samples): peak RSS {fmt(med('peak_rss.verify'), 'MiB')}, "
        f"{fmt(med('secs.verify'), 's')}; index file {fmt(med('index_bytes.big'), 'MB')}.",
    ]
    top = sizes[-1] if sizes else None
    if top:
        idx = med(f"index_bytes.{top}")
        rss = med(f"rss_list.{top}")
        lines += [
            "",
            f"## Targets at {int(top):,} samples",
            "",
            f"- mount live ≤ 2 s: {fmt(med(f'mount_cold.{top}'), 's')} cold, {fmt(med(f'mount_warm.{top}'), 's')} warm",
            f"- RSS ≤ 1.1 × index + 100 MB = {fmt(1.1 * idx + 100e6 if idx else None, 'MiB')}: "
            f"{fmt(med(f'rss_mount.{top}'), 'MiB')} after mount, {fmt(rss, 'MiB')} after listing every directory",
            f"- lookups ≥ 1 M/s on one core: {fmt(med(f'warm_lookups_per_s.{top}'), '/s')} warm, "
            f"{fmt(med(f'cold_lookups_per_s.{top}'), '/s')} cold (first use of every block)",
        ]
    with open(os.path.join(out, "scale.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    with open(os.path.join(out, "scale.tsv"), "w") as f:
        for k, v in meta.items():
            f.write(f"meta\t{k}\t{v}\n")
        for k, v in figs.items():
            f.write(k + "\t" + "\t".join(f"{x:g}" for x in v) + "\n")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
