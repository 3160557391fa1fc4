#!/usr/bin/python3
"""Tables of integration/bench/multinode.sh from its records (standard library only).

  multinode_report.py DATA_BYTES BATCH CONFIG_DIR...

Each CONFIG_DIR is one row's runs: CONFIG_DIR/run-R/ holds rank-I.json (integration/torchcheck/
cluster.py's record of rank I, whose local rank 0 carries its node's stats after each epoch) and
base-K.json (node K's stats before the first epoch, from `aifs stats --json`). The row's name is
the directory's. Prints two markdown tables:

1. Traffic and speed, per row and epoch, medians over the runs: bytes fetched from S3 by all the
   nodes (as a multiple of the set), S3 requests, each node's disk-cache hit rate (chunk reads
   served from disk, min-max over the nodes) and files/s per node (its samples over its slowest
   rank's time; median over the nodes).
2. Batch mix, per row, from the first run's first epoch: for a rank's batches of BATCH samples
   and for the global batch (the i-th batch of every rank together, which one optimizer step
   averages), the distinct classes, the total-variation distance between the batch's class mix
   and the whole set's (0: the same mix, 1: disjoint), and the distinct shards.
"""

import json
import os
import statistics
import sys
from collections import Counter


def load_run(run_dir):
    """Returns (ranks, bases): the rank records by rank and each node's stats before epoch 1."""
    ranks, bases = {}, {}
    for name in os.listdir(run_dir):
        path = os.path.join(run_dir, name)
        if name.startswith("rank-") and name.endswith(".json"):
            with open(path) as f:
                r = json.load(f)
            ranks[r["rank"]] = r
        elif name.startswith("base-") and name.endswith(".json"):
            with open(path) as f:
                bases[int(name[5:-5])] = json.load(f)
    if not ranks:
        raise ValueError(f"{run_dir}: no rank records")
    return ranks, bases


def storage(stats, section, field):
    return ((stats or {}).get("storage", {}).get(section) or {}).get(field, 0)


def traffic(ranks, bases):
    """Returns, per epoch, (s3 bytes, s3 requests, [hit rate per node], [files/s per node])."""
    nodes = sorted({r["node"] for r in ranks.values()})
    epochs = len(next(iter(ranks.values()))["epochs"])
    stats = {}  # node -> the stats of its local rank 0 after each epoch
    for r in ranks.values():
        if r["epochs"][0].get("stats") is not None:
            stats[r["node"]] = [e["stats"] for e in r["epochs"]]
    out = []
    for e in range(epochs):
        total_bytes = total_requests = 0
        hit_rates, speeds = [], []
        for k in nodes:
            prev = bases.get(k) if e == 0 else stats[k][e - 1]
            cur = stats[k][e]
            total_bytes += storage(cur, "s3", "bytes") - storage(prev, "s3", "bytes")
            total_requests += storage(cur, "s3", "requests") - storage(prev, "s3", "requests")
            hits = storage(cur, "disk_cache", "hits") - storage(prev, "disk_cache", "hits")
            misses = storage(cur, "disk_cache", "misses") - storage(prev, "disk_cache", "misses")
            hit_rates.append(hits / (hits + misses) if hits + misses else float("nan"))
            members = [r for r in ranks.values() if r["node"] == k]
            slowest = max(r["epochs"][e]["seconds"] for r in members)
            speeds.append(sum(len(r["epochs"][e]["samples"]) for r in members) / slowest)
        out.append((total_bytes, total_requests, hit_rates, speeds))
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
    print("| row | epoch | S3 fetched (× the set) | S3 requests | disk-cache hit rate per node | files/s per node |")
    print("|---|---|---|---|---|---|")
    mixes = []
    for cdir in configs:
        name = os.path.basename(os.path.normpath(cdir))
        runs = [load_run(os.path.join(cdir, d)) for d in sorted(os.listdir(cdir)) if d.startswith("run-")]
        per_run = [traffic(*run) for run in runs]
        for e in range(len(per_run[0])):
            rows = [t[e] for t in per_run]
            fetched = statistics.median(r[0] for r in rows) / data
            requests = statistics.median(r[1] for r in rows)
            hits = [h for r in rows for h in r[2] if h == h]
            speed = statistics.median(statistics.median(r[3]) for r in rows)
            hit_text = f"{min(hits):.2f}-{max(hits):.2f}" if hits else "no disk reads"
            print(f"| {name} | {e + 1} | {fetched:.2f} | {requests:.0f} | {hit_text} | {speed:,.0f} |")
        ranks = runs[0][0]
        reference = Counter(t for r in ranks.values() for t in r["epochs"][0]["targets"])
        mixes.append((name, len(ranks), batch_mix(ranks, batch, reference)))
    print()
    print(f"| row | classes per rank batch ({batch}) | TV distance, rank batch | shards per rank batch "
          "| classes per global batch | TV distance, global batch | shards per global batch |")
    print("|---|---|---|---|---|---|---|")
    for name, world, (rank_mix, global_mix) in mixes:
        print(f"| {name} | {fmt(rank_mix[0], 1)} | {fmt(rank_mix[1])} | {fmt(rank_mix[2], 1)} "
              f"| {fmt(global_mix[0], 1)} | {fmt(global_mix[1])} | {fmt(global_mix[2], 1)} |")


if __name__ == "__main__":
    main(sys.argv)
