#!/usr/bin/python3
"""Tables of integration/bench/multinode.sh from its records (standard library only).

  multinode_report.py DATA_BYTES BATCH CONFIG_DIR...

Each CONFIG_DIR is one row's runs: CONFIG_DIR/run-R/ holds rank-I.json (integration/torchcheck/
cluster.py's record of rank I, whose local rank 0 carries its node's stats after each epoch),
base-K.json (node K's stats before the first epoch, from `aifs stats --json`) and, if measured,
cpu.tsv (lines "UNIX-SECONDS TICKS-0 TICKS-1 ...": the CPU time of node K's daemon so far, in
clock ticks, sampled as the run went). The row's name is the directory's. Prints markdown tables:

1. Traffic and speed, per row and epoch, medians over the runs: bytes fetched from S3 by all the
   nodes (as a multiple of DATA_BYTES, the set), S3 requests, each node's disk-cache hit rate
   (chunk reads served from disk, min-max over the nodes; on the kernel data plane, whose stats
   have storage.kernel_fill, the share of the reads' fanotify events that did not wait for a fill
   from S3: a shard filled whole raises none), files/s per node (its samples over its slowest
   rank's time; median over the nodes) and the daemon's CPU a sample (median over the nodes: its
   CPU time from the end of the epoch before, or for the first from the start of its slowest
   rank's reads, to the stats read after the epoch, found in cpu.tsv by the stats' time, over
   the node's samples of the epoch).
2. Where rows X and X-kernel are both given (the FUSE and the kernel data plane), per epoch: the
   kernel row's files/s per node and daemon CPU a sample as multiples of the FUSE row's.
3. Batch mix, per row, from the first run's first epoch: for a rank's batches of BATCH samples
   and for the global batch (the i-th batch of every rank together, which one optimizer step
   averages), the distinct classes, the total-variation distance between the batch's class mix
   and the whole set's (0: the same mix, 1: disjoint), and the distinct shards.
"""

import bisect
import json
import os
import statistics
import sys
from collections import Counter
from datetime import datetime


def load_run(run_dir):
    """Returns (ranks, bases, cpu): the rank records by rank, each node's stats before epoch 1
    and its daemon's CPU samples ([(unix seconds, [ticks per node])], [] if not measured)."""
    ranks, bases, cpu = {}, {}, []
    for name in os.listdir(run_dir):
        path = os.path.join(run_dir, name)
        if name.startswith("rank-") and name.endswith(".json"):
            with open(path) as f:
                r = json.load(f)
            ranks[r["rank"]] = r
        elif name.startswith("base-") and name.endswith(".json"):
            with open(path) as f:
                bases[int(name[5:-5])] = json.load(f)
        elif name == "cpu.tsv":
            with open(path) as f:
                for line in f:
                    fields = line.split()
                    if len(fields) > 1:  # a line cut short by the poller's end has fewer
                        cpu.append((float(fields[0]), [int(x) for x in fields[1:]]))
    if not ranks:
        raise ValueError(f"{run_dir}: no rank records")
    return ranks, bases, cpu


def stats_time(stats):
    """Returns when the stats were taken (unix seconds): the daemon's start and its uptime then."""
    started = stats["started"]
    if "." in started:  # fromisoformat takes at most 6 digits of fraction
        head, frac = started.split(".", 1)
        digits = len(frac) - len(frac.lstrip("0123456789"))
        started = head + "." + frac[:min(digits, 6)] + frac[digits:]
    return datetime.fromisoformat(started.replace("Z", "+00:00")).timestamp() + stats["uptime_seconds"]


def cpu_at(cpu, node, t):
    """Returns node's daemon CPU ticks at unix time t, interpolated between the samples; None
    outside them or if the node has no column."""
    times = [c[0] for c in cpu]
    i = bisect.bisect_left(times, t)
    if not cpu or i == len(cpu) or (i == 0 and times[0] > t) or node >= len(cpu[0][1]):
        return None
    if times[i] == t or i == 0:
        return cpu[i][1][node]
    (t0, a), (t1, b) = cpu[i - 1], cpu[i]
    return a[node] + (b[node] - a[node]) * (t - t0) / (t1 - t0)


def storage(stats, section, field):
    return ((stats or {}).get("storage", {}).get(section) or {}).get(field, 0)


def traffic(ranks, bases, cpu=(), hz=None):
    """Returns, per epoch, (s3 bytes, s3 requests, [hit rate per node], [files/s per node],
    [daemon CPU µs a sample per node, of the nodes measured], whether on the kernel plane)."""
    hz = hz or os.sysconf("SC_CLK_TCK")
    nodes = sorted({r["node"] for r in ranks.values()})
    epochs = len(next(iter(ranks.values()))["epochs"])
    stats = {}  # node -> the stats of its local rank 0 after each epoch
    for r in ranks.values():
        if r["epochs"][0].get("stats") is not None:
            stats[r["node"]] = [e["stats"] for e in r["epochs"]]
    out = []
    for e in range(epochs):
        total_bytes = total_requests = 0
        hit_rates, speeds, cpus = [], [], []
        for k in nodes:
            prev = bases.get(k) if e == 0 else stats[k][e - 1]
            cur = stats[k][e]
            total_bytes += storage(cur, "s3", "bytes") - storage(prev, "s3", "bytes")
            total_requests += storage(cur, "s3", "requests") - storage(prev, "s3", "requests")
            if "kernel_fill" in cur.get("storage", {}):
                events = storage(cur, "kernel_fill", "events") - storage(prev, "kernel_fill", "events")
                misses = storage(cur, "kernel_fill", "waited") - storage(prev, "kernel_fill", "waited")
                hits = events - misses
            else:
                hits = storage(cur, "disk_cache", "hits") - storage(prev, "disk_cache", "hits")
                misses = storage(cur, "disk_cache", "misses") - storage(prev, "disk_cache", "misses")
            hit_rates.append(hits / (hits + misses) if hits + misses else float("nan"))
            members = [r for r in ranks.values() if r["node"] == k]
            slowest = max(r["epochs"][e]["seconds"] for r in members)
            samples = sum(len(r["epochs"][e]["samples"]) for r in members)
            speeds.append(samples / slowest)
            end = stats_time(cur) if cpu and "started" in cur else None
            if end is not None:
                start = end - slowest if e == 0 else stats_time(prev)
                a, b = cpu_at(cpu, k, start), cpu_at(cpu, k, end)
                if a is not None and b is not None and samples:
                    cpus.append((b - a) / hz * 1e6 / samples)
        out.append((total_bytes, total_requests, hit_rates, speeds, cpus, "kernel_fill" in cur.get("storage", {})))
    return out


def tv_distance(counts, reference):
    """Total-variation distance between the class mix `counts` and `reference` (Counters)."""
    n, m = sum(counts.values()), sum(reference.values())
    return 0.5 * sum(abs(counts[c] / n - reference[c] / m) for c in set(counts) | set(reference))


def batch_mix(ranks, batch, reference):
    """Returns ((classes, tv, shards) per rank batch, the same per global batch), means over
    the first epoch's full batches. `reference` is the set's class counts."""
    per_rank, per_global = [], []
    orders = [ranks[r]["epochs"][0] for r in sorted(ranks)]
    steps = min(len(o["samples"]) for o in orders) // batch
    for i in range(steps):
        g_classes, g_shards = Counter(), set()
        for o in orders:
            classes = Counter(o["targets"][i * batch : (i + 1) * batch])
            shards = {s[3] for s in o["samples"][i * batch : (i + 1) * batch]}
            per_rank.append((len(classes), tv_distance(classes, reference), len(shards)))
            g_classes.update(classes)
            g_shards |= shards
        per_global.append((len(g_classes), tv_distance(g_classes, reference), len(g_shards)))

    def mean(rows):
        return tuple(statistics.fmean(c) for c in zip(*rows)) if rows else (float("nan"),) * 3

    return mean(per_rank), mean(per_global)


def fmt(x, digits=2):
    return "n/a" if x != x else f"{x:.{digits}f}"


def main(argv):
    if len(argv) < 4:
        sys.exit("usage: multinode_report.py DATA_BYTES BATCH CONFIG_DIR...")
    data, batch, configs = int(argv[1]), int(argv[2]), argv[3:]
    print("| row | epoch | S3 fetched (× the set) | S3 requests | disk-cache hit rate per node "
          "| files/s per node | daemon CPU µs / sample |")
    print("|---|---|---|---|---|---|---|")
    mixes, medians = [], {}  # medians: row -> [(files/s, CPU µs a sample) per epoch]
    for cdir in configs:
        name = os.path.basename(os.path.normpath(cdir))
        runs = [load_run(os.path.join(cdir, d)) for d in sorted(os.listdir(cdir)) if d.startswith("run-")]
        per_run = [traffic(*run) for run in runs]
        medians[name] = []
        for e in range(len(per_run[0])):
            rows = [t[e] for t in per_run]
            fetched = statistics.median(r[0] for r in rows) / data
            requests = statistics.median(r[1] for r in rows)
            hits = [h for r in rows for h in r[2] if h == h]
            speed = statistics.median(statistics.median(r[3]) for r in rows)
            cpus = [statistics.median(r[4]) for r in rows if r[4]]
            cpu = statistics.median(cpus) if cpus else float("nan")
            medians[name].append((speed, cpu))
            hit_text = f"{min(hits):.2f}-{max(hits):.2f}" if hits else "no disk reads"
            if not hits and rows[0][5]:
                hit_text = "no events (copies whole)"
            print(f"| {name} | {e + 1} | {fetched:.2f} | {requests:.0f} | {hit_text} | {speed:,.0f} | {fmt(cpu, 0)} |")
        ranks = runs[0][0]
        reference = Counter(t for r in ranks.values() for t in r["epochs"][0]["targets"])
        mixes.append((name, len(ranks), batch_mix(ranks, batch, reference)))
    pairs = [(name[: -len("-kernel")], name) for name in medians
             if name.endswith("-kernel") and name[: -len("-kernel")] in medians]
    if pairs:
        print()
        print("| kernel row / FUSE row | epoch | files/s per node, kernel / FUSE | daemon CPU a sample, kernel / FUSE |")
        print("|---|---|---|---|")
        for fuse, kernel in pairs:
            for e, ((fs, fc), (ks, kc)) in enumerate(zip(medians[fuse], medians[kernel])):
                print(f"| {kernel} / {fuse} | {e + 1} | **{fmt(ks / fs)}** | {fmt(kc / fc if fc else float('nan'))} |")
    print()
    print(f"| row | classes per rank batch ({batch}) | TV distance, rank batch | shards per rank batch "
          "| classes per global batch | TV distance, global batch | shards per global batch |")
    print("|---|---|---|---|---|---|---|")
    for name, world, (rank_mix, global_mix) in mixes:
        print(f"| {name} | {fmt(rank_mix[0], 1)} | {fmt(rank_mix[1])} | {fmt(rank_mix[2], 1)} "
              f"| {fmt(global_mix[0], 1)} | {fmt(global_mix[1])} | {fmt(global_mix[2], 1)} |")


if __name__ == "__main__":
    main(sys.argv)
