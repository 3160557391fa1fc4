"""Tests of report.py, the writer of compare.sh's report (run by scripts/test.sh)."""

import os
import tempfile
import unittest

import report

META = {
    "machine": "2 cores (test)", "date": "2026-11-22", "commit": "abc1234", "FILES": "100",
    "JOBS": "1 8", "RUNS": "3", "PT_SAMPLES": "64", "WORKERS": "2", "NAMES": "5000",
    "bytes": "11000000", "fio_block": "114688", "memory_limit_q1": "2750000", "memory_limit": "5500000",
    "memory_limit_q3": "8250000", "index_bytes": "300000", "seconds": "120",
    "keep_fraction_q1": "0.2041", "keep_fraction_q2": "0.4385", "keep_fraction_q3": "0.7028",
}
MEMORY = ("memory-8-q1", "memory-8", "memory-8-q3")


def figures(scale):
    """A run's figures; scale multiplies every aifs figure, so that ratios move by it."""
    figs = {}
    for case, base in (("cold-1", 1000), ("cold-8", 4000), ("warm-8", 40000), ("memory-8-q1", 4400),
                       ("memory-8", 5000), ("memory-8-q3", 6000), ("sorted-1", 400), ("pytorch", 300)):
        figs[(case, "ext4")] = base
        figs[(case, "xfs")] = base * 1.25
        figs[(case, "aifs-ext4")] = base * 2 * scale
        figs[(case, "aifs-xfs")] = base * 1.25 * scale
        if case.startswith("memory-8"):
            figs[(case, "ext4-subset")] = base * 1.6  # aifs is 1.25x the reader's stable subset
        if case in ("cold-1", "cold-8", "sorted-1"):
            figs[(case, "fio")] = base * 4
        if case in ("cold-1", "cold-8"):
            figs[(case, "fio-seq")] = base * 5
    # Per memory-limited row and system: hit fraction, cgroup peak and OOM kills, daemon peak RSS.
    for q, case in enumerate(MEMORY, start=1):
        for system, hit in (("ext4", 0.05), ("ext4-subset", 0.14), ("xfs", 0.06), ("aifs-ext4", 0.2), ("aifs-xfs", 0.21)):
            figs[(f"hit-{case}", system)] = hit * q
            figs[(f"disk-{case}", system)] = 1 - hit * q
            figs[(f"peak-{case}", system)] = 2750000 * q
            figs[(f"oom-{case}", system)] = 0
            if system.startswith("aifs"):
                figs[(f"hwm-{case}", system)] = 1000000 * q
    figs[("imagefolder", "ext4")] = 10.0
    figs[("imagefolder", "xfs")] = 12.0
    figs[("imagefolder", "aifs-ext4")] = 9.0 * scale
    figs[("rss", "aifs-ext4")] = 99.0
    # Every figure with its passes, all alike (so ratios are as above): RUNS of them, two more for
    # cold-8 and the sorted scan, as compare.sh measures.
    for case, n in (("cold-1", 3), ("cold-8", 5), ("warm-8", 4), ("memory-8-q1", 3), ("memory-8", 3),
                    ("memory-8-q3", 3), ("hit-memory-8", 3), ("sorted-1", 5), ("pytorch", 3), ("imagefolder", 3)):
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
        # cold-8: aifs on ext4 is 2x ext4, aifs on XFS 1x XFS, aifs/fio 8000/16000, aifs/fio-seq
        # 8000/20000. ext4's stable subset is measured in the memory-limited rows only.
        self.assertIn("| ext4 | ext4, stable subset (fadvise) | XFS | aifs on ext4 | aifs on XFS | fio O_DIRECT (device) | "
                      "fio sequential (device) | aifs/ext4 | aifs/ext4-subset (bound without FUSE) | aifs/XFS | aifs/fio | "
                      "aifs/fio-seq |", md)
        self.assertIn("| cold shuffled epoch, 8 readers | files/s | 4,000 | — | 5,000 | 8,000 | 5,000 | 16,000 | 20,000 | "
                      "**2.00** | — | **1.00** | **0.50** | **0.40** |", md)
        self.assertIn("| warm shuffled epoch, 8 readers | files/s | 40,000 | — | 50,000 | 80,000 | 50,000 | — | — | "
                      "**2.00** | — | **1.00** | — | — |", md)
        self.assertIn("| sorted scan (validation order), 1 reader | MB/s | 400 | — | 500 | 800 | 500 | 1,600 | — | "
                      "**2.00** | — | **1.00** | **0.50** | — |", md)
        # fio sequential's MB/s: 5,000 and 20,000 files/s of 110,000 bytes.
        self.assertIn("its MB/s (550 MB/s at 1 job, 2,200 MB/s at 8 jobs)", md)
        self.assertNotIn("aifs before", md)  # no OLD_AIFS, no column
        self.assertNotIn("OOM kills in the memory-limited epochs", md)
        self.assertIn("| time relative to ext4 | **1.00** | **1.20** | **0.90** |", md)
        self.assertIn("| FUSE daemon RSS after the scans (MiB) | — | — | 99 |", md)
        self.assertIn("the median of 4 epochs", md)  # the warm epochs recorded, whatever RUNS is
        self.assertIn("before 3 timed scans", md)
        self.assertIn("Each figure is the median of 3 passes (5 for the cold shuffled epoch, 8 readers; "
                      "5 for the sorted scan (validation order), 1 reader),", md)
        self.assertNotIn("squashfuse", md)  # no column, and no mention, without its figures
        self.assertNotIn("## Repeatability", md)
        self.assertNotIn("## CPU per file", md)  # no CPU figures, no section
        self.assertNotIn("no I/O", md)
        with open(os.path.join(self.out, "compare.png"), "rb") as f:
            self.assertEqual(f.read(8), b"\x89PNG\r\n\x1a\n")
        with open(os.path.join(self.out, "compare.tsv")) as f:
            self.assertIn("cold-8\taifs-ext4\t8000", f.read())

    def test_memory_rows(self):
        md = self.run_report(META, figures(1))
        # A row per limit in the main table, memory-8 being the half (the case earlier runs had),
        # with ext4's stable subset after ext4 and aifs against it (8,800/7,040).
        self.assertIn("| shuffled epochs, memory limited to 1/4 of the dataset, 8 readers | files/s | 4,400 | 7,040 | "
                      "5,500 | 8,800 | 5,500 | — | — | **2.00** | **1.25** | **1.00** | — | — |", md)
        self.assertIn("| shuffled epochs, memory limited to 1/2 of the dataset, 8 readers | files/s | 5,000 |", md)
        self.assertIn("| shuffled epochs, memory limited to 3/4 of the dataset, 8 readers | files/s | 6,000 |", md)
        self.assertIn("limited to 3, 6 and 8 MB (1/4, 1/2 and 3/4 of the dataset)", md)
        self.assertIn("F = (limit − limit/16 − 32 MiB) / the dataset's bytes: 0.20 at 1/4, 0.44 at 1/2 and 0.70 at 3/4.", md)
        # Hit fractions beside the ideal c and the LRU c²/2 (the stable subset's ideal being F).
        self.assertIn("its ideal is h = F, not c: 0.20 at 1/4, 0.44 at 1/2 and 0.70 at 3/4.", md)
        self.assertIn("| limit | ideal, c | LRU, c²/2 | ext4 | ext4, stable subset (fadvise) | XFS | aifs on ext4 | "
                      "aifs on XFS |", md)
        self.assertIn("| 3 MB (1/4) | 0.25 | 0.03 | 0.05 | 0.14 | 0.06 | 0.20 | 0.21 |", md)
        self.assertIn("| 6 MB (1/2) | 0.50 | 0.12 | 0.10 | 0.28 | 0.12 | 0.40 | 0.42 |", md)
        self.assertIn("| 8 MB (3/4) | 0.75 | 0.28 | 0.15 | 0.42 | 0.18 | 0.60 | 0.63 |", md)
        # Memory use against the limit; no daemon on a native file system.
        self.assertIn("| 6 MB (1/2) | ext4 | 6 | 1.00 | — | 0 |", md)
        self.assertIn("| 6 MB (1/2) | ext4, stable subset (fadvise) | 6 | 1.00 | — | 0 |", md)
        self.assertIn("| 8 MB (3/4) | aifs on XFS | 8 | 1.00 | 3 | 0 |", md)
        self.assertIn("![files/s and hit fraction against the memory limit](compare-memory.png)", md)
        with open(os.path.join(self.out, "compare-memory.png"), "rb") as f:
            self.assertEqual(f.read(8), b"\x89PNG\r\n\x1a\n")

    def test_memory_model(self):
        # ext4 cold 4,000 and warm 40,000 files/s: half the bytes from the cache take 1/8,000 +
        # 1/80,000 s a file, 7,273 files/s.
        model = report.memory_model(META, figures(1))
        self.assertAlmostEqual(model(0), 4000)
        self.assertAlmostEqual(model(1), 40000)
        self.assertAlmostEqual(model(0.5), 1 / (0.5 / 4000 + 0.5 / 40000))
        self.assertIsNone(report.memory_model(META, {k: v for k, v in figures(1).items() if k[0] != "warm-8"}))

    def test_oom_kill_is_shown(self):
        figs = figures(1)
        # aifs on ext4's daemon killed in the quarter's cgroup before any timed epoch: no figure,
        # no hit fraction, no daemon left to read the peak RSS of.
        for k in [k for k in figs if k[1] == "aifs-ext4" and k[0].split("/")[0] in (
                "memory-8-q1", "hit-memory-8-q1", "hwm-memory-8-q1")]:
            del figs[k]
        figs[("oom-memory-8-q1", "aifs-ext4")] = 1
        figs[("failed-memory-8-q1", "aifs-ext4")] = 4
        md = self.run_report(META, figs)
        self.assertIn("**OOM kills in the memory-limited epochs:** aifs on ext4 at 1/4 of the dataset, 1 OOM kill, "
                      "4 of 4 epochs failed.", md)
        self.assertIn("| 3 MB (1/4) | aifs on ext4 | 3 | 1.00 | — | **1** (**4 of 4 epochs failed**) |", md)
        self.assertIn("| shuffled epochs, memory limited to 1/4 of the dataset, 8 readers | files/s | 4,400 | 7,040 | "
                      "5,500 | — | 5,500 | — | — | — | — | **1.00** | — | — |", md)
        self.assertIn("| 3 MB (1/4) | 0.25 | 0.03 | 0.05 | 0.14 | 0.06 | — | 0.21 |", md)

    def test_reading_more_than_the_dataset_is_shown(self):
        figs = figures(1)
        figs[("hit-memory-8", "aifs-xfs")] = 0
        figs[("disk-memory-8", "aifs-xfs")] = 1.3
        md = self.run_report(META, figs)
        self.assertIn("| 6 MB (1/2) | 0.50 | 0.12 | 0.10 | 0.28 | 0.12 | 0.40 | 0.00 (read 1.30×) |", md)

    def test_limit_raised_by_the_floor(self):
        # A small run: 64 MiB is more than a quarter of the dataset, so the row says what c it had.
        meta = dict(META, bytes="200000000", memory_limit_q1=str(64 << 20), memory_limit="100000000",
                    memory_limit_q3="150000000")
        md = self.run_report(meta, figures(1))
        self.assertIn("| shuffled epochs, memory limited to 0.34 of the dataset, 8 readers |", md)
        self.assertIn("| 67 MB (0.34) | 0.34 | 0.06 |", md)

    def test_old_build(self):
        figs = figures(1)
        for case in ("cold-1", "cold-8", "warm-8", "memory-8-q1", "memory-8", "memory-8-q3", "sorted-1"):
            for c in [c for c, s in figs if s == "ext4" and c.split("/")[0] == case]:
                figs[(c, "aifs-old")] = figs[(c, "ext4")] * 1.6  # aifs now is 2x ext4: 1.25x before
        figs[("hit-memory-8", "aifs-old")] = 0.3
        figs[("oom-memory-8", "aifs-old")] = 0
        md = self.run_report(dict(META, old_aifs="/tmp/aifs-old (sha256 0123456789ab)"), figs)
        self.assertIn("\"aifs before\" is `/tmp/aifs-old (sha256 0123456789ab)` mounting the ext4 image's shard set", md)
        self.assertIn("| ext4 | ext4, stable subset (fadvise) | XFS | aifs on ext4 | aifs on XFS | aifs before | "
                      "fio O_DIRECT (device) | fio sequential (device) | aifs/ext4 | aifs/ext4-subset (bound without FUSE) | "
                      "aifs/XFS | aifs/fio | aifs/fio-seq | aifs/aifs before |", md)
        self.assertIn("| cold shuffled epoch, 8 readers | files/s | 4,000 | — | 5,000 | 8,000 | 5,000 | 6,400 | 16,000 | "
                      "20,000 | **2.00** | — | **1.00** | **0.50** | **0.40** | **1.25** |", md)
        self.assertIn("| shuffled epochs, memory limited to 1/4 of the dataset, 8 readers | files/s | 4,400 | 7,040 | 5,500 | "
                      "8,800 | 5,500 | 7,040 | — | — | **2.00** | **1.25** | **1.00** | — | — | **1.25** |", md)
        self.assertIn("| PyTorch DataLoader, 2 workers, decode + transform | samples/s | 300 | — | 375 | 600 | 375 | — | — | — | "
                      "**2.00** | — | **1.00** | — | — | — |", md)
        self.assertIn("| limit | ideal, c | LRU, c²/2 | ext4 | ext4, stable subset (fadvise) | XFS | aifs on ext4 | "
                      "aifs on XFS | aifs before |", md)
        self.assertIn("| 6 MB (1/2) | 0.50 | 0.12 | 0.10 | 0.28 | 0.12 | 0.40 | 0.42 | 0.30 |", md)
        self.assertIn("| 6 MB (1/2) | aifs before | — | — | — | 0 |", md)

    def test_second_run_says_how_far_ratios_moved(self):
        self.run_report(META, figures(1))
        md = self.run_report(dict(META, commit="def5678"), figures(1.1))
        self.assertIn("## Repeatability", md)
        self.assertIn("Against the run before this one (2026-11-22, commit abc1234)", md)
        self.assertIn("| cold-8 | aifs/ext4 | 2.00 | 2.20 | +10% |", md)
        self.assertIn("at most 10%", md)
        self.assertIn("| cold-8 | fio alone (the device; not a ratio) | 16,000 | 16,000 | +0% |", md)
        self.assertIn("| cold-8 | fio sequential alone (the device; not a ratio) | 20,000 | 20,000 | +0% |", md)
        self.assertIn("| memory-8-q1 | aifs/ext4 | 2.00 | 2.20 | +10% |", md)
        self.assertIn("| memory-8 | aifs/ext4-subset (bound without FUSE) | 1.25 | 1.38 | +10% |", md)

    def test_run_before_the_memory_rows_is_compared(self):
        # compare.tsv of a run before the rows at 1/4 and 3/4, fio sequential, the hit fractions
        # and ext4's stable subset: the ratios both runs have are compared, memory-8 among them.
        old = {k: v for k, v in figures(1).items()
               if k[1] not in ("fio-seq", "ext4-subset")
               and not k[0].startswith(("memory-8-q", "hit-", "peak-", "oom-", "hwm-"))}
        meta = {k: v for k, v in META.items() if k not in ("memory_limit_q1", "memory_limit_q3")
                and not k.startswith("keep_fraction")}
        md = self.run_report(dict(meta, memory_limit="268435456"), old)
        self.assertNotIn("stable subset", md)  # no column, and no mention, without its figures
        self.assertNotIn("aifs/ext4-subset", md)
        md = self.run_report(dict(META, commit="def5678"), figures(1.1))
        self.assertIn("| memory-8 | aifs/ext4 | 2.00 | 2.20 | +10% |", md)
        self.assertNotIn("| memory-8-q1 |", md)
        self.assertNotIn("aifs/fio-seq |", md.split("## Repeatability")[1])
        self.assertNotIn("aifs/ext4-subset", md.split("## Repeatability")[1])

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
        self.assertIn("| cold shuffled epoch, 8 readers | files/s | 4,000 | — | 5,000 | 8,000 | 4,000 | 16,000 | 20,000 | "
                      "**2.00** | — | **1.00** | **0.50** | **0.40** |", md)
        self.assertNotIn("cold-8/", md)  # passes are not rows of their own
        md = self.run_report(dict(META, commit="def5678"), figs)
        self.assertIn("| cold-8 | aifs/XFS | 1.00 | 1.00 | +0% |", md)
        self.assertNotIn("| cold-8/1 |", md)

    def test_stable_subset(self):
        figs = {k: v for k, v in figures(1).items() if not k[0].startswith("memory-8/")}
        # Three memory-8 passes. aifs on ext4 against ext4's stable subset: 10000/5000, 12000/12000,
        # 9000/6000, pass by pass 2, 1 and 1.5, so the ratio is 1.50; the medians' would be
        # 10000/6000. aifs against ext4 (5,000 each pass): 2.00.
        for n, (a, sub) in enumerate(((10000, 5000), (12000, 12000), (9000, 6000)), start=1):
            figs[(f"memory-8/{n}", "ext4")] = 5000
            figs[(f"memory-8/{n}", "aifs-ext4")] = a
            figs[(f"memory-8/{n}", "ext4-subset")] = sub
        figs[("memory-8", "ext4-subset")] = 6000
        figs[("oom-memory-8-q3", "ext4-subset")] = 2
        md = self.run_report(META, figs)
        self.assertIn("| shuffled epochs, memory limited to 1/2 of the dataset, 8 readers | files/s | 5,000 | 6,000 | "
                      "6,250 | 10,000 | 6,250 | — | — | **2.00** | **1.50** | **1.00** | — | — |", md)
        self.assertIn("a second copy of the tree for ext4, stable subset.", md)
        self.assertIn("**aifs/ext4-subset (bound without FUSE)** is aifs on ext4 against it.", md)
        self.assertIn("**OOM kills in the memory-limited epochs:** ext4, stable subset (fadvise) at 3/4 of the dataset, "
                      "2 OOM kills.", md)
        self.assertIn("| 8 MB (3/4) | ext4, stable subset (fadvise) | 8 | 1.00 | — | **2** |", md)
        # Without F in the meta (results compare.sh did not write), the notes give no values.
        meta = {k: v for k, v in META.items() if not k.startswith("keep_fraction")}
        md = self.run_report(meta, figs)
        self.assertIn("F = (limit − limit/16 − 32 MiB) / the dataset's bytes.", md)
        self.assertIn("its ideal is h = F, not c.", md)

    def test_cpu_bound(self):
        figs = figures(1)
        # aifs, no I/O: 10,000 files/s at 8 readers, 12,000 at 1/2; aifs on ext4 is 0.80 and 0.83 of it.
        for case, noio in (("cold-8", 10000), ("memory-8", 12000)):
            figs[(case, "aifs-noio")] = noio
            figs.update({(f"{case}/{i}", "aifs-noio"): noio for i in range(1, 6 if case == "cold-8" else 4)})
        # CPU per file: ext4 100 µs, aifs 200, aifs without I/O 160, at 8 readers; at 1/2 only aifs.
        for system, us in (("ext4", 100), ("aifs-ext4", 200), ("aifs-noio", 160)):
            figs[("cpu-cold-8", system)] = us
        figs[("cpu-memory-8", "aifs-ext4")] = 250
        md = self.run_report(dict(META, cpus="2"), figs)
        self.assertIn("| fio sequential (device) | aifs, no I/O (CPU bound) | aifs/ext4 |", md)
        self.assertIn("| cold shuffled epoch, 8 readers | files/s | 4,000 | — | 5,000 | 8,000 | 5,000 | 16,000 | 20,000 | "
                      "10,000 | **2.00** | — | **1.00** | **0.50** | **0.40** | **0.80** |", md)
        self.assertIn("served the same bytes as ext4 (`aifs bench` digests), but aifs, no I/O, a bound that serves stale bytes.", md)
        # 2 CPUs over 100 µs a file: 20,000 files/s; over 200 µs: 10,000.
        self.assertIn("| | ext4 | aifs on ext4 | aifs, no I/O (CPU bound) |", md)
        self.assertIn("| cold shuffled epoch, 8 readers | 100 (20,000) | 200 (10,000) | 160 (12,500) |", md)
        self.assertIn("| shuffled epochs, memory limited to 1/2 of the dataset, 8 readers | — | 250 (8,000) | — |", md)
        self.assertNotIn("| cold shuffled epoch, 1 reader | ", md.split("## CPU per file")[1].split("##")[0])
        # Without the machine's CPU count (results compare.sh did not write), no section.
        md = self.run_report(META, figs)
        self.assertNotIn("## CPU per file", md)

    def test_bound_at_half(self):
        figs = figures(1)
        # At 1/2: ext4 5,000 files/s, XFS 6,250, aifs on ext4 10,000 (disk share 1 - 0.4 = 0.6),
        # aifs, no I/O 16,000 at 100 µs a file; fio 50 µs a read. 100 + 0.6 × 50 = 130 µs a file:
        # 2 CPUs busy serve 15,385 files/s, 3.08× ext4, 2.46× XFS; aifs is 0.65 of it.
        figs.update({(c, "aifs-noio"): 16000 for c in ("memory-8", "memory-8/1", "memory-8/2", "memory-8/3")})
        figs[("cpu-memory-8", "aifs-noio")] = 100
        figs[("fio-busy-memory-8", "fio")] = 50
        md = self.run_report(dict(META, cpus="2"), figs)
        section = md.split("## Memory limited to 1/2: this machine's bound")[1].split("\n## ")[0]
        self.assertIn("An aifs with both costs needs 100 + 0.60 × 50 = 130 µs a file: 2 CPUs always busy serve "
                      "15,385 files/s.", section)
        self.assertIn("aifs, no I/O itself kept the CPUs 80% busy.", section)
        self.assertIn("| | files/s | /ext4 | /XFS | /bound |", section)
        self.assertIn("| ext4 | 5,000 | 1.00 | 0.80 | 0.33 |", section)
        self.assertIn("| aifs on ext4 | 10,000 | 2.00 | 1.60 | 0.65 |", section)
        self.assertIn("| aifs, no I/O (CPU bound) | 16,000 | 3.20 | 2.56 | 1.04 |", section)
        self.assertIn("| bound: aifs, no I/O's CPU + aifs's disk reads at fio's CPU, every CPU busy | 15,385 | 3.08 | 2.46 | 1.00 |",
                      section)
        # fio's busy CPU is the system fio of its own case: no column of the CPU per file table.
        self.assertNotIn("fio", md.split("## CPU per file")[1].split("\n## ")[0])
        # Without fio's figure (a run before it), no section.
        del figs[("fio-busy-memory-8", "fio")]
        self.assertNotIn("this machine's bound", self.run_report(dict(META, cpus="2"), figs))

    def test_other_settings_are_not_compared(self):
        self.run_report(META, figures(1))
        md = self.run_report(dict(META, FILES="200"), figures(2))
        self.assertNotIn("## Repeatability", md)
        self.assertIn("had other settings; it is not compared", md)


if __name__ == "__main__":
    unittest.main()
