"""The report of mlperf.sh: OUT/mlperf.md, OUT/mlperf.tsv (a row per run) and OUT/mlperf.png (AU
against the simulated accelerators N, per system).

usage: mlperf_report.py RESULTS OUT

OUT/mlperf-findings.md, if there is one (written by hand: what a run showed and why), is added at
the end of OUT/mlperf.md, so that writing the report again keeps it.

RESULTS holds one JSON object a line: {"meta": {KEY: VALUE}} lines, one line per run (mlperf.py
run's object, with the fields mlperf.sh adds: workload, system, floor, limit, dataset_bytes,
daemon, daemon_ticks, requests, clk_tck) and one per fio run (system "fio"). Each figure of a run
is the median over its epochs after the warm-up; a ratio to ext4 compares figures of the same run.
"""

import json
import os
import statistics
import sys

import mlperf

TITLE = "MLPerf-Storage-style (OPEN shape, cgroup-scaled), not a submission"
# MLPerf Storage's unscaled shapes (batch, step seconds), for the published figures' scale.
PUBLISHED = {
    "resnet50": [("H100", 400, 0.224), ("A100", 400, 0.435)],
    "retinanet": [("H100 (v3.0)", 24, 0.04755)],
}
ORDER = {"ext4": 0, "xfs": 1, "ext4-mem": 2}
# The hand-written findings that OUT/mlperf.md ends with (see the module's doc).
FINDINGS = "mlperf-findings.md"


def load(path):
    """The runs of RESULTS: (meta, runs, fio, roundtrips)."""
    meta, runs, fio, rts = {}, [], [], []
    with open(path) as f:
        for line in f:
            obj = json.loads(line)
            if "meta" in obj:
                meta.update(obj["meta"])
            elif obj["system"] == "fio":
                fio.append(obj)
            elif obj["system"] == "roundtrip":
                rts.append(obj)
            else:
                runs.append(obj)
    return meta, runs, fio, rts


def summarize(run):
    """One run's row: the medians over its measured epochs, and per sample read (warm-up included)
    the FUSE requests and the daemon's CPU µs (None without a daemon); the processes' peak
    memory (anonymous + mapped files, bytes) and the dataset over what the limit left the page
    cache for it."""
    epochs = run["epochs"]
    measured = [e for e in epochs if not e["warmup"]]
    aus = [e["au"] for e in measured]
    samples = sum(e["samples"] for e in epochs)
    row = {
        "workload": run["workload"], "system": run["system"], "n": run["n"], "step": run["step"],
        "batch": run["batch"], "floor": run["floor"], "epochs": len(measured),
        "au": statistics.median(aus), "au_min": min(aus), "au_max": max(aus),
        "samples_per_s": mlperf.median_measured(epochs, "samples_per_s"),
        "mib_per_s": mlperf.median_measured(epochs, "mib_per_s"),
        "requests_per_sample": None, "daemon_us_per_sample": None,
        "procs_peak": None, "limit": run.get("limit"), "cache_ratio": None,
        "shard_bytes": None, "budget": None, "plan_readahead": None,
        "worker_ms_per_sample": None, "worker_faults_per_sample": None, "passes": 1, "pass_rates": None,
        "busy_us_per_sample": None, "cpus_busy": None, "cpus": run.get("cpus"),
    }
    if measured and all("busy_s" in e for e in measured):
        busy = sum(e["busy_s"] for e in measured)
        row["busy_us_per_sample"] = busy * 1e6 / sum(e["samples"] for e in measured)
        row["cpus_busy"] = busy / sum(e["wall"] for e in measured)
    if measured and all("worker_minflt" in e for e in measured):
        n = sum(e["samples"] for e in measured)
        row["worker_ms_per_sample"] = sum(e["worker_user_s"] + e["worker_sys_s"] for e in measured) * 1e3 / n
        row["worker_faults_per_sample"] = sum(e["worker_minflt"] for e in measured) / n
    stats = run.get("stats") or {}
    if "backend" in stats:
        row["shard_bytes"] = stats["backend"]["bytes"]
    if "page_cache" in stats:
        row["budget"] = stats["page_cache"]["budget_bytes"]
    if stats.get("plan_readahead", {}).get("delivered") or stats.get("plan_readahead", {}).get("wasted"):
        row["plan_readahead"] = stats["plan_readahead"]
    if run.get("daemon"):
        row["requests_per_sample"] = run["requests"] / samples
        row["daemon_us_per_sample"] = run["daemon_ticks"] * 1e6 / run["clk_tck"] / samples
    cgs = [e["cgroup"] for e in epochs if e.get("cgroup")]
    if cgs:
        row["procs_peak"] = max(c["anon"] + c["mapped"] for c in cgs)
        room = cgs[0]["limit"] - row["procs_peak"]
        row["cache_ratio"] = run["dataset_bytes"] / room if room > 0 else float("inf")
    return row


# The figures of a row that merge_passes takes the median of over the passes.
MEDIAN_FIELDS = ("au", "samples_per_s", "mib_per_s", "requests_per_sample", "daemon_us_per_sample", "procs_peak",
                 "cache_ratio", "shard_bytes", "budget", "worker_ms_per_sample", "worker_faults_per_sample",
                 "busy_us_per_sample", "cpus_busy")


def merge_passes(rows):
    """One row for each (workload, system, N, step) of the runs (PASSES > 1 runs each more than
    once): the median over its passes of each of MEDIAN_FIELDS (over the passes that have it),
    the lowest and highest AU of any epoch, and `pass_rates`, each pass's samples/s in the order
    of the run. Rows appear in the order of their first pass."""
    groups = {}
    for r in rows:
        groups.setdefault((r["workload"], r["system"], r["n"], r["step"]), []).append(r)
    out = []
    for rs in groups.values():
        row = dict(rs[-1])
        for k in MEDIAN_FIELDS:
            vals = [r[k] for r in rs if r[k] is not None]
            row[k] = statistics.median(vals) if vals else None
        row.update(au_min=min(r["au_min"] for r in rs), au_max=max(r["au_max"] for r in rs), passes=len(rs),
                   pass_rates=[r["samples_per_s"] for r in rs])
        out.append(row)
    return out


def pass_ratios(torch_row, plan_row):
    """plan ÷ torch samples/s of each pass (pass i of one against pass i of the other: the
    systems of a pass ran one after the other), as text: "—" with one pass."""
    a, b = torch_row["pass_rates"] or [], plan_row["pass_rates"] or []
    if min(len(a), len(b)) < 2:
        return "—"
    return ", ".join(f"{p / t:.2f}" for t, p in zip(a, b))


def systems_of(rows):
    """The systems in the order of the run (ext4 and XFS first)."""
    seen = list(dict.fromkeys(r["system"] for r in rows))
    return sorted(seen, key=lambda s: (ORDER.get(s, 2), seen.index(s)))


def sweep(rows, workload, system):
    """A system's sweep over N: (largest N at the floor, its row or None, the no-compute row or
    None)."""
    mine = [r for r in rows if r["workload"] == workload and r["system"] == system]
    timed = {r["n"]: r for r in mine if r["step"] > 0}
    if not timed:
        return 0, None, next((r for r in mine if r["step"] == 0), None)
    floor = next(iter(timed.values()))["floor"]
    best = mlperf.largest_n({n: r["au"] for n, r in timed.items()}, floor)
    return best, timed.get(best), next((r for r in mine if r["step"] == 0), None)


def sampler_pairs(rows, workload):
    """The regression case of the plan sampler (issue 46): for each plane with both a `:torch`
    and a `:plan` system, and each (N, step) that both ran, (plane, n, step, torch row, plan
    row). A plan must never make the workload slower than torch's sampler."""
    mine = {(r["system"], r["n"], r["step"]): r for r in rows if r["workload"] == workload}
    out = []
    for system in systems_of([r for r in rows if r["workload"] == workload]):
        plane, _, sampler = system.partition(":")
        if sampler != "torch":
            continue
        for (s, n, step), torch_row in sorted(mine.items(), key=lambda kv: (kv[0][2] == 0, kv[0][1])):
            plan_row = mine.get((plane + ":plan", n, step))
            if s == system and plan_row:
                out.append((plane, n, step, torch_row, plan_row))
    return out


def readahead(row):
    """A plan row's read-ahead: samples delivered / wasted, and whether plans read ahead at the
    end (on, off: the plan gate)."""
    ra = row["plan_readahead"]
    if not ra:
        return "—"
    return f"{ra['delivered']:,} / {ra['wasted']:,}, {ra['state'].split(':')[0]}"


def fmt(v, digits=0):
    if v is None:
        return "—"
    if isinstance(v, float) and v == float("inf"):
        return "∞"
    return f"{v:,.{digits}f}"


def ratio(a, b):
    return fmt(a / b, 2) if a is not None and b else "—"


def bound_base(rows, workload):
    """The system whose busy CPU a sample the FUSE plane's bound starts from: the kernel plane
    (aifs-kernel, the same shards and decisions without FUSE) where the run has it, else ext4."""
    systems = {r["system"] for r in rows if r["workload"] == workload and r["step"] == 0}
    return next((s for s in ("aifs-kernel", "aifs-kernel:dlio", "aifs-kernel:torch") if s in systems), "ext4")


def bounds(rows, rts, workload):
    """The bounds of `workload`'s no-compute runs, measured in the same run: (the ext4-mem row
    (the dataset in memory: the loader's ceiling) or None, the cost of a FUSE round trip in µs
    (mlperf.roundtrip_us of the medians of the `roundtrip` runs) or None, and for each system on
    the FUSE plane (aifs, aifs:SAMPLER) its no-compute row and its bound, mlperf.cpu_bound of
    bound_base's busy CPU a sample and the system's requests a sample, or None)."""
    _, _, base = sweep(rows, workload, bound_base(rows, workload))
    _, _, mem = sweep(rows, workload, "ext4-mem")

    def busy(fs):
        vals = [r["busy_us_per_file"] for r in rts if r["workload"] == workload and r["fs"] == fs]
        return statistics.median(vals) if vals else None

    reqs = [r["requests_per_file"] for r in rts if r["workload"] == workload and r["fs"] == "aifs"
            and r["requests_per_file"] is not None]
    rt = None
    if busy("ext4") is not None and busy("aifs") is not None and reqs:
        rt = mlperf.roundtrip_us(busy("ext4"), busy("aifs"), statistics.median(reqs))
    fuse = []
    for s in systems_of([r for r in rows if r["workload"] == workload]):
        if s.partition(":")[0] != "aifs":
            continue
        _, _, nc = sweep(rows, workload, s)
        bound = None
        if nc and base and rt is not None and base["busy_us_per_sample"] and nc["requests_per_sample"] is not None:
            bound = mlperf.cpu_bound(base["cpus"] or os.cpu_count(), base["busy_us_per_sample"],
                                     nc["requests_per_sample"], rt)
        fuse.append((s, nc, bound))
    return mem, rt, fuse


def bounds_section(rows, rts, workload, nocompute):
    """The report's lines for bounds(): empty when the run measured none."""
    mem, rt, fuse = bounds(rows, rts, workload)
    _, _, ext4_nc = sweep(rows, workload, "ext4")
    base_name = bound_base(rows, workload)
    _, _, base = sweep(rows, workload, base_name)
    if mem is None and rt is None:
        return []
    ext4 = ext4_nc and ext4_nc["samples_per_s"]
    out = [f"Bounds with no compute (N={nocompute}), measured in this run:", "",
           "| bound | samples/s | × ext4 | measured samples/s | measured ÷ bound |", "|---|---|---|---|---|"]
    if mem:
        out.append(f"| ext4, all in memory (`ext4-mem`: no memory limit, warm): the loader's own ceiling on this "
                   f"machine, more than any storage can feed it | {fmt(mem['samples_per_s'])} "
                   f"| {ratio(mem['samples_per_s'], ext4)} | — | — |")
    for s, nc, bound in fuse:
        if bound is None or base is None:
            continue
        out.append(f"| FUSE plane ({s}): {base_name}'s {base['busy_us_per_sample']:,.0f} µs of busy CPU a sample + "
                   f"{nc['requests_per_sample']:.2f} requests × {rt:,.0f} µs, on {base['cpus'] or os.cpu_count()} CPUs "
                   f"| {fmt(bound)} | {ratio(bound, ext4)} | {fmt(nc['samples_per_s'])} "
                   f"| {ratio(nc['samples_per_s'], bound)} |")
    out.append("")
    mine = [r for r in rts if r["workload"] == workload]
    if rt is not None and mine:
        by = {r["fs"]: r for r in mine}
        out.append(f"A FUSE round trip costs {rt:,.0f} µs of the machine's busy CPU here (`mlperf.py roundtrip`: "
                   f"the dataset's files warm, read whole by {by['ext4']['procs']} processes in "
                   f"{by['ext4']['passes']} shuffled epochs a system; ext4 {by['ext4']['busy_us_per_file']:,.0f} µs "
                   f"a file, the FUSE plane {by['aifs']['busy_us_per_file']:,.0f} µs with "
                   f"{by['aifs']['requests_per_file']:.2f} requests a file). The FUSE plane's bound takes {base_name}'s "
                   f"work a sample (" + ("the same shards and decisions without FUSE" if base_name != "ext4" else
                                         "the native file system's") +
                   ") as the least a sample costs, adds the plane's requests at that cost, and keeps every CPU busy: "
                   "a plane that is not CPU-bound (CPUs busy below the machine's) is below it for another reason.")
        out.append("")
    return out


def markdown(meta, runs, fio, rts=()):
    """The report: `runs` are summarize's rows, one a run (each pass); the tables of the sweep
    and of the samplers take the median over the passes (merge_passes), the table of every run
    lists each."""
    rows = merge_passes(runs)
    out = [f"# {TITLE}", ""]
    out.append("Written by `sudo integration/bench/mlperf.sh` (integration/bench/mlperf_report.py). DLIO's PyTorch "
               "training loop, written for this harness (integration/bench/mlperf.py): N simulated accelerators, each a "
               "process with its own DataLoader, sleeping the step time after each batch, then a barrier of all; AU = Σ "
               "step time / (epoch time − first step), per epoch; each figure is the median over the epochs after the "
               "warm-up; ratios compare systems of the same run. The readers, and aifs's daemon, run in one memory cgroup "
               "whose page-cache room is at most 1/5 of the dataset; caches are dropped before each run.")
    out.append("")
    for k in ("machine", "shared", "date", "commit", "seconds"):
        if k in meta:
            out.append(f"- {k}: {meta[k]}")
    knobs = [f"{k}={meta[k]}" for k in ("WORKLOADS", "SYSTEMS", "RESNET50_FILES", "RETINANET_FILES", "NS", "NOCOMPUTE_N",
                                        "EPOCHS", "WARMUP", "ACCEL", "SCALE", "THREADS", "PROC_MB", "RANK_MB", "STOP", "FIO_S",
                                        "PASSES", "FIXED_MALLOC")
             if k in meta]
    if knobs:
        out.append("- knobs: " + ", ".join(f"`{k}`" for k in knobs))
    out.append("")
    for wl in dict.fromkeys(r["workload"] for r in rows):
        mine = [r for r in rows if r["workload"] == wl]
        timed = [r for r in mine if r["step"] > 0]
        batch, step, floor = mine[0]["batch"], timed[0]["step"] if timed else 0, mine[0]["floor"]
        nocompute = next((r["n"] for r in mine if r["step"] == 0), None)
        size = meta.get(f"bytes_{wl}")
        out.append(f"## {wl}")
        out.append("")
        desc = f"Batch {batch}, step {step} s, AU floor {floor:.2f}"
        if step:
            desc += f": one accelerator needs ≥ {batch / step * floor:,.0f} samples/s"
        if size:
            desc += f"; dataset {int(size) / 1e9:.2f} GB"
        out.append(desc + ".")
        out.append("")
        out.append(f"| system | largest N at AU ≥ {floor:.2f} | AU there | samples/s there | MiB/s there | × ext4 (N) "
                   f"| no compute, N={nocompute}: samples/s | × ext4 | FUSE requests a sample | daemon CPU µs a sample "
                   f"| busy CPU µs a sample, no compute | CPUs busy, no compute | dataset ÷ page-cache room |")
        out.append("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
        base_n, _, base_nc = sweep(rows, wl, "ext4")
        for s in systems_of(mine):
            best, at, nc = sweep(rows, wl, s)
            ref = nc or at
            out.append(f"| {s} | {best} | {fmt(at and at['au'], 3)} | {fmt(at and at['samples_per_s'])} "
                       f"| {fmt(at and at['mib_per_s'])} | {ratio(best, base_n) if base_n else '—'} "
                       f"| {fmt(nc and nc['samples_per_s'])} | {ratio(nc and nc['samples_per_s'], base_nc and base_nc['samples_per_s'])} "
                       f"| {fmt(ref and ref['requests_per_sample'], 2)} | {fmt(ref and ref['daemon_us_per_sample'])} "
                       f"| {fmt(nc and nc['busy_us_per_sample'])} | {fmt(nc and nc['cpus_busy'], 2)} "
                       f"| {fmt(ref and ref['cache_ratio'], 1)} |")
        out.append("")
        out += bounds_section(rows, rts, wl, nocompute)
        pub = PUBLISHED.get(wl)
        if pub:
            out.append("For scale, MLPerf Storage's unscaled figures: " + "; ".join(
                f"one simulated {name} needs ≥ {b / s * floor:,.0f} samples/s ({b / s * floor * mlperf_record(wl) / 2**20:,.0f} MiB/s)"
                for name, b, s in pub) + (". Published single-client results range from 20 to 128 simulated H100 "
                                          "(ResNet-50)." if wl == "resnet50" else "."))
            out.append("")
        pairs = sampler_pairs(rows, wl)
        if pairs:
            out.append("aifs's sampler against torch's (issue 46: `aifs_plan.DistributedSampler` must never be slower "
                       "than torch's `DistributedSampler` on the same plane; samples/s and AU are medians over the "
                       "epochs, and over the passes with PASSES > 1, each pass's ratio beside; the workers' CPU "
                       "(user + system) and minor faults count the DataLoader workers of every rank over the "
                       "measured epochs; shard bytes and the page-cache budget come from the mount's stats at the run's end, "
                       "warm-up included; read ahead by plans: samples delivered / wasted, and whether plans still "
                       "read ahead at the end):")
            out.append("")
            out.append("| plane | N | step s | passes | torch samples/s | plan samples/s | plan ÷ torch | each pass "
                       "| torch AU | plan AU | shard GB torch / plan | page-cache budget MB torch / plan "
                       "| read ahead by plans | workers' CPU ms a sample torch / plan "
                       "| workers' minor faults a sample torch / plan |")
            out.append("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
            for plane, n, step, t, pl in pairs:
                gb = "—" if t["shard_bytes"] is None or pl["shard_bytes"] is None else \
                    f"{t['shard_bytes'] / 1e9:.2f} / {pl['shard_bytes'] / 1e9:.2f}"
                mb = "—" if t["budget"] is None or pl["budget"] is None else \
                    f"{t['budget'] / 1e6:,.0f} / {pl['budget'] / 1e6:,.0f}"
                out.append(f"| {plane} | {n} | {step} | {min(t['passes'], pl['passes'])} | {fmt(t['samples_per_s'])} "
                           f"| {fmt(pl['samples_per_s'])} | {ratio(pl['samples_per_s'], t['samples_per_s'])} "
                           f"| {pass_ratios(t, pl)} | {t['au']:.3f} | {pl['au']:.3f} "
                           f"| {gb} | {mb} | {readahead(pl)} "
                           f"| {fmt(t['worker_ms_per_sample'], 2)} / {fmt(pl['worker_ms_per_sample'], 2)} "
                           f"| {fmt(t['worker_faults_per_sample'], 1)} / {fmt(pl['worker_faults_per_sample'], 1)} |")
            out.append("")
        out.append("Every run, each pass (requests and daemon CPU a sample count the warm-up epoch; the workers' CPU "
                   "and faults the measured epochs; memory is the processes' peak anonymous + mapped bytes in the "
                   "cgroup):")
        out.append("")
        out.append("| system | N | step s | AU (min–max) | samples/s | MiB/s | requests a sample | daemon µs a sample "
                   "| workers' CPU ms a sample | workers' minor faults a sample | processes MiB | limit MiB "
                   "| dataset ÷ room |")
        out.append("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
        each = [r for r in runs if r["workload"] == wl]
        for r in sorted(each, key=lambda r: (systems_of(mine).index(r["system"]), r["step"] == 0, r["n"])):
            out.append(f"| {r['system']} | {r['n']} | {r['step']} | {r['au']:.3f} ({r['au_min']:.3f}–{r['au_max']:.3f}) "
                       f"| {fmt(r['samples_per_s'])} | {fmt(r['mib_per_s'])} | {fmt(r['requests_per_sample'], 2)} "
                       f"| {fmt(r['daemon_us_per_sample'])} | {fmt(r['worker_ms_per_sample'], 2)} "
                       f"| {fmt(r['worker_faults_per_sample'], 1)} | {fmt(r['procs_peak'] and r['procs_peak'] / 2**20)} "
                       f"| {fmt(r['limit'] and r['limit'] / 2**20)} | {fmt(r['cache_ratio'], 1)} |")
        out.append("")
        fios = [f for f in fio if f["workload"] == wl]
        if fios:
            out.append("The device's bound: fio's O_DIRECT random reads of one sample's size, one in flight per job, "
                       "as many jobs as the readers (N × read threads), samples/s: " +
                       ", ".join(f"N={f['n']} ({f['jobs']} jobs) {f['samples_per_s']:,}" for f in fios) + ".")
            out.append("")
    out.append("![AU against N](mlperf.png)")
    out.append("")
    return "\n".join(out)


def mlperf_record(wl):
    return mlperf.RESNET50_RECORD if wl == "resnet50" else mlperf.RETINANET_RECORD


TSV_FIELDS = ("workload", "system", "n", "step", "batch", "epochs", "au", "au_min", "au_max", "samples_per_s",
              "mib_per_s", "requests_per_sample", "daemon_us_per_sample", "procs_peak", "limit", "cache_ratio",
              "shard_bytes", "budget", "worker_ms_per_sample", "worker_faults_per_sample", "busy_us_per_sample",
              "cpus_busy")


def tsv(rows, fio):
    lines = ["\t".join(TSV_FIELDS)]
    for r in rows:
        lines.append("\t".join("" if r[k] is None else (f"{r[k]:.4f}" if isinstance(r[k], float) else str(r[k]))
                               for k in TSV_FIELDS))
    for f in fio:
        row = {k: "" for k in TSV_FIELDS}
        row.update(workload=f["workload"], system="fio", n=f["n"], samples_per_s=f["samples_per_s"])
        lines.append("\t".join(str(row[k]) for k in TSV_FIELDS))
    return "\n".join(lines) + "\n"


def plot(rows, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    workloads = list(dict.fromkeys(r["workload"] for r in rows))
    fig, axes = plt.subplots(1, len(workloads), figsize=(6 * len(workloads), 4.2), squeeze=False)
    for ax, wl in zip(axes[0], workloads):
        mine = [r for r in rows if r["workload"] == wl and r["step"] > 0]
        for s in systems_of(mine):
            pts = sorted((r["n"], r["au"]) for r in mine if r["system"] == s)
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=s)
        if mine:
            ax.axhline(mine[0]["floor"], color="grey", linestyle="--", linewidth=1, label=f"floor {mine[0]['floor']:.2f}")
        ax.set_xticks(sorted({r["n"] for r in mine}))
        ax.set_title(wl)
        ax.set_xlabel("simulated accelerators N")
        ax.set_ylabel("AU (median over epochs)")
        ax.set_ylim(0, 1.05)
        ax.legend(fontsize=8)
    fig.suptitle(TITLE, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=100)


def main(argv):
    if len(argv) != 2:
        raise SystemExit(__doc__)
    meta, runs, fio, rts = load(argv[0])
    rows = [summarize(r) for r in runs]
    os.makedirs(argv[1], exist_ok=True)
    md = markdown(meta, rows, fio, rts)
    findings = os.path.join(argv[1], FINDINGS)
    if os.path.exists(findings):
        with open(findings) as f:
            md += "\n" + f.read()
    with open(os.path.join(argv[1], "mlperf.md"), "w") as f:
        f.write(md)
    with open(os.path.join(argv[1], "mlperf.tsv"), "w") as f:
        f.write(tsv(rows, fio))
    plot(merge_passes(rows), os.path.join(argv[1], "mlperf.png"))


if __name__ == "__main__":
    main(sys.argv[1:])
