"""Tests for multinode_report.py on synthetic runs: 2 nodes of one rank, 2 epochs, on the FUSE
and the kernel data plane.

Run: /usr/bin/python3 -m unittest discover -s integration/bench -v
"""

import io
import json
import os
import tempfile
import unittest
from collections import Counter
from contextlib import redirect_stdout
from datetime import datetime, timezone

import multinode_report


def stats(requests, s3_bytes, hits, misses):
    return {"storage": {"s3": {"requests": requests, "bytes": s3_bytes}, "disk_cache": {"hits": hits, "misses": misses}}}


def write_ranks(run_dir, epoch_stats, base, seconds):
    """Writes a run of 2 nodes of one rank and 2 epochs: node 0 reads classes 0 and 1 from shard
    0, node 1 classes 2 and 3 from shard 1, 4 samples an epoch each, rank R in seconds[R]; the
    stats after epoch E are epoch_stats[E], before the first base."""
    os.makedirs(run_dir)
    for rank in (0, 1):
        epochs = []
        for e in range(2):
            samples = [[f"c{2 * rank + i % 2}/f{i}", 10, 0, rank] for i in range(4)]
            epochs.append({"seconds": seconds[rank], "samples": samples,
                           "targets": [2 * rank + i % 2 for i in range(4)], "stats": epoch_stats[e]})
        with open(os.path.join(run_dir, f"rank-{rank}.json"), "w") as f:
            json.dump({"rank": rank, "node": rank, "epochs": epochs}, f)
        with open(os.path.join(run_dir, f"base-{rank}.json"), "w") as f:
            json.dump(base, f)


def write_run(run_dir):
    write_ranks(run_dir, [stats(15, 1300, 0, 4), stats(15, 1300, 4, 4)], stats(10, 1000, 0, 0), (1.0, 2.0))


STARTED = "2026-11-29T07:00:00.123456789Z"  # the daemons' start, nanoseconds as Go writes them
T0 = datetime(2026, 11, 29, 7, 0, 0, 123456, tzinfo=timezone.utc).timestamp()
HZ = os.sysconf("SC_CLK_TCK")


def kernel_stats(uptime, events, waited, s3_bytes):
    return {"started": STARTED, "uptime_seconds": uptime,
            "storage": {"s3": {"requests": s3_bytes // 100, "bytes": s3_bytes},
                        "kernel_fill": {"events": events, "waited": waited}}}


def write_kernel_run(run_dir):
    """The same reads on the kernel plane, twice as fast: stats taken 10 s (before the first
    epoch), 20 s and 30 s after the daemons' start; in epoch 1 each node fetched 300 bytes and 5
    of its 10 events waited, in epoch 2 its copies were whole. Node 0's daemon used 1 s of CPU
    from 10 s to 20 s and 2 s more to 30 s; node 1's 2 s to 20 s and nothing after."""
    write_ranks(run_dir, [kernel_stats(20, 10, 5, 300), kernel_stats(30, 10, 5, 300)], kernel_stats(10, 0, 0, 0), (0.5, 1.0))
    with open(os.path.join(run_dir, "cpu.tsv"), "w") as f:
        for t, (a, b) in ((5, (0, 0)), (10, (0, 0)), (20, (1, 2)), (30, (3, 2))):
            f.write(f"{T0 + t:.6f} {a * HZ} {b * HZ}\n")
        f.write(f"{T0 + 31:.6f}\n")  # cut short by the poller's end


class MultinodeReportTest(unittest.TestCase):
    def test_tables(self):
        with tempfile.TemporaryDirectory() as d:
            write_run(os.path.join(d, "aifs", "run-1"))
            out = io.StringIO()
            with redirect_stdout(out):
                multinode_report.main(["x", "600", "2", os.path.join(d, "aifs")])
        lines = out.getvalue().splitlines()
        # Epoch 1: each node fetched 300 bytes in 5 requests, 0 hits of 4; 4 samples in 1 s and
        # 2 s. No CPU samples were taken.
        self.assertIn("| aifs | 1 | 1.00 | 10 | 0.00-0.00 | 3 | n/a |", lines)
        # Epoch 2: nothing fetched, 4 hits of 4 on each node.
        self.assertIn("| aifs | 2 | 0.00 | 0 | 1.00-1.00 | 3 | n/a |", lines)
        self.assertFalse(any("kernel / FUSE" in line for line in lines), "a ratio table with no kernel row")
        # A rank batch of 2 holds 2 classes of one node (TV 0.5 from the set's 4 equal classes)
        # and 1 shard; the global batch all 4 classes (TV 0) and 2 shards.
        self.assertIn("| aifs | 2.0 | 0.50 | 1.0 | 4.0 | 0.00 | 2.0 |", lines)

    def test_kernel_rows(self):
        with tempfile.TemporaryDirectory() as d:
            write_run(os.path.join(d, "aifs", "run-1"))
            write_kernel_run(os.path.join(d, "aifs-kernel", "run-1"))
            out = io.StringIO()
            with redirect_stdout(out):
                multinode_report.main(["x", "600", "2", os.path.join(d, "aifs"), os.path.join(d, "aifs-kernel")])
        lines = out.getvalue().splitlines()
        # Epoch 1: 4 samples in 0.5 s and 1 s; the CPU from the start of each node's reads
        # (19.5 s, 19 s) to the stats at 20 s: 0.05 s and 0.2 s over 4 samples, 12,500 and 50,000
        # µs a sample, median 31,250.
        self.assertIn("| aifs-kernel | 1 | 1.00 | 6 | 0.50-0.50 | 6 | 31250 |", lines)
        # Epoch 2: no events; the CPU from 20 s to 30 s: 2 s and 0 over 4 samples.
        self.assertIn("| aifs-kernel | 2 | 0.00 | 0 | no events (copies whole) | 6 | 250000 |", lines)
        self.assertIn("| aifs-kernel / aifs | 1 | **2.00** | n/a |", lines)
        self.assertIn("| aifs-kernel / aifs | 2 | **2.00** | n/a |", lines)

    def test_stats_time(self):
        self.assertAlmostEqual(multinode_report.stats_time(kernel_stats(1.5, 0, 0, 0)), T0 + 1.5, places=5)
        self.assertAlmostEqual(multinode_report.stats_time({"started": "2026-11-29T07:00:00Z", "uptime_seconds": 2}),
                               T0 - 0.123456 + 2, places=5)

    def test_tv_distance(self):
        self.assertEqual(multinode_report.tv_distance(Counter({1: 2}), Counter({1: 1, 2: 1})), 0.5)
        self.assertEqual(multinode_report.tv_distance(Counter({1: 3, 2: 3}), Counter({1: 1, 2: 1})), 0.0)


if __name__ == "__main__":
    unittest.main()
