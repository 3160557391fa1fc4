"""Tests of report.py, the writer of compare.sh's report (run by scripts/test.sh)."""

import os
import tempfile
import unittest

import report

META = {
    "machine": "2 cores (test)", "date": "2026-11-22", "commit": "abc1234", "FILES": "100",
    "JOBS": "1 8", "RUNS": "3", "PT_SAMPLES": "64", "WORKERS": "2", "NAMES": "5000",
    "bytes": "11000000", "fio_block": "114688", "memory_limit": "268435456", "index_bytes": "300000",
    "seconds": "120",
}


def figures(scale):
    """A run's figures; scale multiplies every aifs figure, so that ratios move by it."""
    figs = {}
    for case, base in (("cold-1", 1000), ("cold-8", 4000), ("warm-8", 40000), ("memory-8", 5000),
                       ("sorted-1", 400), ("pytorch", 300)):
        figs[(case, "ext4")] = base
        figs[(case, "xfs")] = base * 1.25
        figs[(case, "aifs-ext4")] = base * 2 * scale
        figs[(case, "aifs-xfs")] = base * 1.25 * scale
        if case in ("cold-1", "cold-8", "sorted-1"):
            figs[(case, "fio")] = base * 4
    figs[("imagefolder", "ext4")] = 10.0
    figs[("imagefolder", "xfs")] = 12.0
    figs[("imagefolder", "aifs-ext4")] = 9.0 * scale
    figs[("rss", "aifs-ext4")] = 99.0
    # Every figure with its passes, all alike (so ratios are as above): RUNS of them, two more for
    # cold-8 and the sorted scan, as compare.sh measures.
    for case, n in (("cold-1", 3), ("cold-8", 5), ("warm-8", 4), ("memory-8", 3), ("sorted-1", 5),
                    ("pytorch", 3), ("imagefolder", 3)):
        for (c, system), v in list(figs.items()):
            if c == case:
                figs.update({(f"{case}/{i}", system): v for i in range(1, n + 1)})
    return figs


def write_tsv(path, meta, figs):
    with open(path, "w") as f:
        for k, v in meta.items():
            f.write(f"meta\t{k}\t{v}\n")
        for (case, system), v in figs.items():
            f.write(f"{case}\t{system}\t{v}\n")


class ReportTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.addCleanup(self.dir.cleanup)
        self.out = os.path.join(self.dir.name, "out")
        os.mkdir(self.out)

    def run_report(self, meta, figs):
        results = os.path.join(self.dir.name, "results.tsv")
        write_tsv(results, meta, figs)
        report.main(["report.py", results, self.out])
        with open(os.path.join(self.out, "compare.md")) as f:
            return f.read()

    def test_first_run(self):
        md = self.run_report(META, figures(1))
        # cold-8: aifs on ext4 is 2x ext4, aifs on XFS 1x XFS, aifs/fio 8000/16000.
        self.assertIn("| cold shuffled epoch, 8 readers | files/s | 4,000 | 5,000 | 8,000 | 5,000 | 16,000 | "
                      "**2.00** | **1.00** | **0.50** |", md)
        self.assertIn("| warm shuffled epoch, 8 readers | files/s | 40,000 | 50,000 | 80,000 | 50,000 | — | "
                      "**2.00** | **1.00** | — |", md)
        self.assertIn("| time relative to ext4 | **1.00** | **1.20** | **0.90** |", md)
        self.assertIn("| FUSE daemon RSS after the scans (MiB) | — | — | 99 |", md)
        self.assertIn("the median of 4 epochs", md)  # the warm epochs recorded, whatever RUNS is
        self.assertIn("before 3 timed scans", md)
        self.assertIn("Each figure is the median of 3 passes (5 for the cold shuffled epoch, 8 readers; "
                      "5 for the sorted scan (validation order), 1 reader),", md)
        self.assertNotIn("squashfuse", md)  # no column, and no mention, without its figures
        self.assertNotIn("## Repeatability", md)
        with open(os.path.join(self.out, "compare.png"), "rb") as f:
            self.assertEqual(f.read(8), b"\x89PNG\r\n\x1a\n")
        with open(os.path.join(self.out, "compare.tsv")) as f:
            self.assertIn("cold-8\taifs-ext4\t8000", f.read())

    def test_second_run_says_how_far_ratios_moved(self):
        self.run_report(META, figures(1))
        md = self.run_report(dict(META, commit="def5678"), figures(1.1))
        self.assertIn("## Repeatability", md)
        self.assertIn("Against the run before this one (2026-11-22, commit abc1234)", md)
        self.assertIn("| cold-8 | aifs/ext4 | 2.00 | 2.20 | +10% |", md)
        self.assertIn("at most 10%", md)
        self.assertIn("| cold-8 | fio alone (the device; not a ratio) | 16,000 | 16,000 | +0% |", md)

    def test_ratios_pair_the_passes(self):
        figs = {k: v for k, v in figures(1).items() if not k[0].startswith("cold-8/")}
        # Three cold-8 passes. aifs on XFS against XFS: 5000/5000, 3000/2000, 4000/8000, pass
        # by pass 1, 1.5 and 0.5, so the ratio is 1.00; the medians' ratio would be 4000/5000.
        # aifs on ext4 against ext4: 2, 3 and 1.8, so 2.00.
        for n, (e, a, x, ax) in enumerate(((4000, 8000, 5000, 5000), (1000, 3000, 2000, 3000),
                                           (5000, 9000, 8000, 4000)), start=1):
            figs[(f"cold-8/{n}", "ext4")] = e
            figs[(f"cold-8/{n}", "aifs-ext4")] = a
            figs[(f"cold-8/{n}", "xfs")] = x
            figs[(f"cold-8/{n}", "aifs-xfs")] = ax
        figs[("cold-8", "aifs-xfs")] = 4000
        md = self.run_report(META, figs)
        self.assertIn("| cold shuffled epoch, 8 readers | files/s | 4,000 | 5,000 | 8,000 | 4,000 | 16,000 | "
                      "**2.00** | **1.00** | **0.50** |", md)
        self.assertNotIn("cold-8/", md)  # passes are not rows of their own
        md = self.run_report(dict(META, commit="def5678"), figs)
        self.assertIn("| cold-8 | aifs/XFS | 1.00 | 1.00 | +0% |", md)
        self.assertNotIn("| cold-8/1 |", md)

    def test_other_settings_are_not_compared(self):
        self.run_report(META, figures(1))
        md = self.run_report(dict(META, FILES="200"), figures(2))
        self.assertNotIn("## Repeatability", md)
        self.assertIn("had other settings; it is not compared", md)


if __name__ == "__main__":
    unittest.main()
