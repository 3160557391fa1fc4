"""Tests for multinode_report.py on a synthetic run: 2 nodes of one rank, 2 epochs.

Run: /usr/bin/python3 -m unittest discover -s integration/bench -v
"""

import io
import json
import os
import tempfile
import unittest
from collections import Counter
from contextlib import redirect_stdout

import multinode_report


def stats(requests, s3_bytes, hits, misses):
    return {"storage": {"s3": {"requests": requests, "bytes": s3_bytes}, "disk_cache": {"hits": hits, "misses": misses}}}


def write_run(run_dir):
    os.makedirs(run_dir)
    # Node 0 reads classes 0 and 1 from shard 0, node 1 classes 2 and 3 from shard 1.
    for rank in (0, 1):
        epochs = []
        for e in range(2):
            samples = [[f"c{2 * rank + i % 2}/f{i}", 10, 0, rank] for i in range(4)]
            st = stats(10 + 5 * (e == 0), 1000 + 300 * (e == 0), 4 * e, 4 * (1 - e)) if e == 0 else stats(15, 1300, 4, 4)
            epochs.append({"seconds": 2.0 if rank else 1.0, "samples": samples,
                           "targets": [2 * rank + i % 2 for i in range(4)], "stats": st})
        with open(os.path.join(run_dir, f"rank-{rank}.json"), "w") as f:
            json.dump({"rank": rank, "node": rank, "epochs": epochs}, f)
        with open(os.path.join(run_dir, f"base-{rank}.json"), "w") as f:
            json.dump(stats(10, 1000, 0, 0), f)


class MultinodeReportTest(unittest.TestCase):
    def test_tables(self):
        with tempfile.TemporaryDirectory() as d:
            write_run(os.path.join(d, "aifs", "run-1"))
            out = io.StringIO()
            with redirect_stdout(out):
                multinode_report.main(["x", "600", "2", os.path.join(d, "aifs")])
        lines = out.getvalue().splitlines()
        # Epoch 1: each node fetched 300 bytes in 5 requests, 0 hits of 4; 4 samples in 1 s and 2 s.
        self.assertIn("| aifs | 1 | 1.00 | 10 | 0.00-0.00 | 3 |", lines)
        # Epoch 2: nothing fetched, 4 hits of 4 on each node.
        self.assertIn("| aifs | 2 | 0.00 | 0 | 1.00-1.00 | 3 |", lines)
        # A rank batch of 2 holds 2 classes of one node (TV 0.5 from the set's 4 equal classes)
        # and 1 shard; the global batch all 4 classes (TV 0) and 2 shards.
        self.assertIn("| aifs | 2.0 | 0.50 | 1.0 | 4.0 | 0.00 | 2.0 |", lines)

    def test_tv_distance(self):
        self.assertEqual(multinode_report.tv_distance(Counter({1: 2}), Counter({1: 1, 2: 1})), 0.5)
        self.assertEqual(multinode_report.tv_distance(Counter({1: 3, 2: 3}), Counter({1: 1, 2: 1})), 0.0)


if __name__ == "__main__":
    unittest.main()
