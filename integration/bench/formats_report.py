"""formats_report.py RES OUT — the report of integration/bench/formats.sh.

RES holds the run's figures, a file a figure (CASE.SYSTEM, one pass a line) and meta (KEY, tab,
value); OUT receives formats.md and formats.tsv. A figure is the median of its passes; a ratio
the median of the passes' ratios, pass by pass (in the epochs copy a with pack a, copy b with
pack b).
"""
import os
import statistics as st
import sys

NAMES = {"unaligned": "packed, --align 1", "zipsorted": "ZIP in path order", "zip": "ZIP", "tfrecord": "TFRecord", "arrow": "HF Arrow", "parquet": "HF Parquet"}
WHAT = {
    "zip": "stored members (Go's archive/zip); checksums: the central directories' CRC-32s",
    "tfrecord": "tf.train.Example records, ImageNet script keys; checksums: CRC32C of images and files",
    "arrow": "Arrow IPC stream, `datasets` schema; checksums: CRC32C of images and files",
    "parquet": "uncompressed PLAIN Parquet, `datasets` schema; checksums: CRC32C of images and files",
}


def load(res):
    meta = dict(line.rstrip("\n").split("\t", 1) for line in open(os.path.join(res, "meta")))
    fig = {}
    for name in os.listdir(res):
        if name != "meta":
            case, system = name.rsplit(".", 1)
            fig[(case, system)] = [float(x) for x in open(os.path.join(res, name)).read().split()]
    return meta, fig


def report(meta, fig):
    """Returns the lines of formats.md."""
    med = lambda c, s: st.median(fig[(c, s)])
    rng = lambda c, s: f"{min(fig[(c, s)]):.2f}–{max(fig[(c, s)]):.2f}"

    def ratio(pairs):
        return st.median(x / y for a, b in pairs for x, y in zip(fig[a], fig[b]))

    def verdict(v, ok):
        """The figure a target is judged on, to one digit more than the tables give, and the verdict."""
        return f"**{'met' if ok else 'missed'}** ({v:.3f})"

    formats = meta["FORMATS"].split()
    archives, members, runs = int(meta["ARCHIVES"]), int(meta["MEMBERS"]), int(meta["RUNS"])
    n = archives * members
    md = [
        "# ZIP, TFRecord and Hugging Face files indexed in place (aifs index)",
        "",
        f"Measured by `sudo integration/bench/formats.sh` on {meta['date']} at commit {meta['commit']}, in "
        f"{int(meta['seconds']) // 60} min {int(meta['seconds']) % 60} s (FORMATS=\"{meta['FORMATS']}\", "
        f"ARCHIVES={archives}, MEMBERS={members}, MEMBER_SIZE={meta['MEMBER_SIZE']}, JPEGS={meta['JPEGS']}, "
        f"JOBS=\"{meta['JOBS']}\", RUNS={runs}{', SMOKE=1' if meta['SMOKE'] == '1' else ''}).",
        "",
        f"**Machine:** {meta['machine']}; load average {meta['load']} at the start, {meta['load_end']} at the end."
        + (f" {meta['NOTE']}" if meta["NOTE"] else ""),
        "",
        f"Each figure is the median of {runs} passes (their range beside it); a ratio is the median of the "
        "passes' ratios. Everything lies on ext4 images loop-mounted with direct I/O on one disk, caches "
        "dropped before every timed command (cold) but the warm index.",
        "",
        f"## Index: {archives:,} files of {members:,} samples ({n:,} samples of {meta['MEMBER_SIZE']} bytes on average) a format",
        "",
        "Warm: `aifs index` with checksums and the files in the page cache, the index's own work "
        "without the disk: the least the cold index can take on this machine's cores, so warm / `cat` "
        "over 1.2 bounds the target. CPU seconds (user + system) and peak RSS are those of the cold "
        "index with checksums, CPU warm that of the warm one.",
        "",
        "| format | GB | `cat` s | index s | index / cat | --no-checksums s | / cat | warm s | warm / cat | CPU s | CPU warm | peak RSS | index MB |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    targets = []
    for f in formats:
        c = f"index-{f}"
        r, rn = ratio([((c, "aifs"), (c, "cat"))]), ratio([((c, "nosum"), (c, "cat"))])
        rw = ratio([((c, "warm"), (c, "cat"))])
        md.append(
            f"| {NAMES[f]} | {int(meta['bytes-' + f]) / 1e9:.2f} | {med(c, 'cat'):.2f} ({rng(c, 'cat')}) | "
            f"{med(c, 'aifs'):.2f} ({rng(c, 'aifs')}) | **{r:.2f}** | {med(c, 'nosum'):.2f} ({rng(c, 'nosum')}) | {rn:.2f} | "
            f"{med(c, 'warm'):.2f} | {rw:.2f} | {med('cpu-' + c, 'aifs'):.2f} | {med('cpu-' + c, 'warm'):.2f} | "
            f"{med('rss-' + c, 'aifs') / 1024:.0f} MiB | {int(meta['index_bytes-' + f]) / 1e6:.1f} |")
        bound = f"; bounded here: the warm index alone takes {rw:.2f}× `cat`" if r > 1.2 and rw > 1.2 else ""
        targets.append(f"- {NAMES[f]}: index with checksums / `cat` ≤ 1.2: {verdict(r, r <= 1.2)}{bound}")
        if f == "arrow":
            s = med(c, "nosum")
            targets.append(f"- HF Arrow without checksums ≤ 10 s: {verdict(s, s <= 10)} s")
    md += ["", "Targets:", ""] + targets
    md += [
        "",
        f"## Mount of the checksummed index ({n:,} samples), cold",
        "",
        "| format | `aifs mount` s | daemon RSS | `find MNT \\| wc -l` s | daemon RSS after |",
        "|---|---|---|---|---|",
    ]
    for f in formats:
        md.append(f"| {NAMES[f]} | {med('mount-' + f, 'aifs'):.2f} ({rng('mount-' + f, 'aifs')}) | "
                  f"{med('rss-mounted-' + f, 'aifs') / 1024:.0f} MiB | {med('list-' + f, 'aifs'):.2f} | "
                  f"{med('rss-listed-' + f, 'aifs') / 1024:.0f} MiB |")
    md += [
        "",
        f"## Cold shuffled epochs: {int(meta['JPEGS']):,} JPEGs ({int(meta['jpeg_bytes']) / 1e9:.2f} GB) through "
        "each format's imagefolder view, against the tree packed by aifs pack and on ext4",
        "",
        "Two copies of each set (a, b; written pack a, the formats' a, the formats' b in reverse, pack b); "
        "a format's ratio pairs copy a with pack a and b with b. \"packed, --align 1\" is the control: "
        "the tree packed with its samples end to end, unaligned, as the formats hold them. CPU: the "
        "daemon's µs a file; read: the bytes it read from its files over the dataset's.",
        "",
    ]
    systems = meta.get("EPOCH_SYSTEMS", " ".join(["packed", "unaligned"] + formats)).split()
    for f in systems:
        s = f"jpeg-index-{f}" if f != "packed" else "jpeg-pack"
        if (s, "a") in fig:
            md.append(f"- {'pack' if f == 'packed' else NAMES[f] + ' index'}: {med(s, 'a'):.2f} s (copy a), {med(s, 'b'):.2f} s (copy b)")
    md.append("")
    for j in meta["JOBS"].split():
        c = f"cold-{j}"
        md += [
            f"**{j} reader{'s' if j != '1' else ''}** (ext4: {med(c, 'ext4'):,.0f} files/s)",
            "",
            "| system | files/s a | files/s b | / packed | CPU µs a file | read / dataset | target ≥ 0.95 |",
            "|---|---|---|---|---|---|---|",
        ]
        for f in systems:
            a, b = (c, f + "-a"), (c, f + "-b")
            cpu = st.median(fig[("cpu-" + c, f + "-a")] + fig[("cpu-" + c, f + "-b")])
            disk = st.median(fig[("disk-" + c, f + "-a")] + fig[("disk-" + c, f + "-b")])
            row = f"| {NAMES.get(f, 'packed')} | {med(*a):,.0f} | {med(*b):,.0f} |"
            if f == "packed":
                md.append(f"{row} 1 | {cpu:.0f} | {disk:.2f} | |")
                continue
            r = ratio([(a, (c, "packed-a")), (b, (c, "packed-b"))])
            target = "(control)" if f == "unaligned" else verdict(r, r >= 0.95)
            md.append(f"{row} **{r:.2f}** | {cpu:.0f} | {disk:.2f} | {target} |")
        md.append("")
    return md


def main():
    res, out = sys.argv[1], sys.argv[2]
    meta, fig = load(res)
    md = report(meta, fig)
    open(os.path.join(out, "formats.md"), "w").write("\n".join(md) + "\n")
    with open(os.path.join(out, "formats.tsv"), "w") as f:
        f.write("figure\tsystem\tmedian\tpasses\n")
        for (c, s), v in sorted(fig.items()):
            f.write(f"{c}\t{s}\t{st.median(v)}\t{','.join(str(x) for x in v)}\n")
    print("\n".join(md))


if __name__ == "__main__":
    main()
