"""Tests for mlperf.py's arithmetic (the index map, the steps, AU and throughput, the sweep over N)
and for mlperf_report.py on a fixed synthetic run, on fixed inputs.

Run: /usr/bin/python3 -m unittest discover -s integration/bench -v
"""

import json
import os
import tempfile
import unittest

import mlperf
import mlperf_report


class IndexMapTest(unittest.TestCase):
    def test_blocks(self):
        # S = 10, N = 3: ⌈10/3⌉ = 4, blocks [0, 4), [4, 8), [8, 10).
        want = [set(range(0, 4)), set(range(4, 8)), {8, 9}]
        for r in range(3):
            self.assertEqual(set(mlperf.dlio_indices(10, 3, r, seed=5, epoch=0)), want[r])

    def test_more_ranks_than_blocks(self):
        # S = 5, N = 4: ⌈5/4⌉ = 2, so rank 3's block [6, 8) lies past the end: empty.
        self.assertEqual([len(mlperf.dlio_indices(5, 4, r, 0, 0)) for r in range(4)], [2, 2, 1, 0])

    def test_shuffle_seeded_by_seed_plus_epoch(self):
        a = mlperf.dlio_indices(1000, 2, 1, seed=7, epoch=3)
        self.assertEqual(a, mlperf.dlio_indices(1000, 2, 1, seed=7, epoch=3))  # deterministic
        self.assertEqual(a, mlperf.dlio_indices(1000, 2, 1, seed=8, epoch=2))  # only seed + epoch counts
        self.assertNotEqual(a, mlperf.dlio_indices(1000, 2, 1, seed=7, epoch=4))
        self.assertNotEqual(a, sorted(a))  # shuffled
        self.assertEqual(sorted(a), list(range(500, 1000)))

    def test_ranks_cover_the_dataset_once(self):
        got = [i for r in range(7) for i in mlperf.dlio_indices(12000, 7, r, 0, 2)]
        self.assertEqual(sorted(got), list(range(12000)))


class StepsTest(unittest.TestCase):
    def test_dlio_floor(self):
        # ⌊12000 / 50 / 7⌋ = 34; the last block (12000 − 6·1715 = 1710 samples) still has 34 batches.
        lengths = [len(mlperf.dlio_indices(12000, 7, r, 0, 0)) for r in range(7)]
        self.assertEqual(mlperf.steps_per_epoch(12000, 7, 50, lengths), 34)

    def test_short_last_rank(self):
        # S = 10, N = 4, B = 1: ⌊10/4⌋ = 2, but the last rank holds 1 sample: 1 step, or the
        # barrier would wait for it forever.
        lengths = [len(mlperf.dlio_indices(10, 4, r, 0, 0)) for r in range(4)]
        self.assertEqual(mlperf.steps_per_epoch(10, 4, 1, lengths), 1)


class MetricsTest(unittest.TestCase):
    def test_rank(self):
        # 4 steps of 0.5 s compute; the first step took 1.5 s; the epoch 4.5 s: the window is
        # 3 s, with 1.5 s of compute after the first step (AU 0.5) and 3 steps of 10 samples.
        au, rate = mlperf.rank_metrics([0.5, 0.5, 0.5, 0.5], first=1.5, wall=4.5, batch=10)
        self.assertAlmostEqual(au, 0.5)
        self.assertAlmostEqual(rate, 10.0)

    def test_rank_too_short(self):
        self.assertEqual(mlperf.rank_metrics([0.5], first=1.0, wall=1.0, batch=10), (0.0, 0.0))

    def test_epoch(self):
        ranks = [
            {"compute": [0.5, 0.5, 0.5, 0.5], "first": 1.5, "wall": 4.5},  # AU 0.5, 10 samples/s
            {"compute": [0.5, 0.5, 0.5, 0.5], "first": 0.5, "wall": 2.0},  # AU 1.0, 20 samples/s
        ]
        m = mlperf.epoch_metrics(ranks, batch=10, record=2**20)
        self.assertAlmostEqual(m["au"], 0.75)
        self.assertAlmostEqual(m["samples_per_s"], 30.0)
        self.assertAlmostEqual(m["mib_per_s"], 30.0)
        self.assertEqual(m["steps"], 4)

    def test_au_weighted_by_steps(self):
        ranks = [
            {"compute": [1.0] * 3, "first": 1.0, "wall": 3.0},  # AU 1.0 over 3 steps
            {"compute": [1.0] * 5, "first": 1.0, "wall": 9.0},  # AU 0.5 over 5 steps
        ]
        self.assertAlmostEqual(mlperf.epoch_metrics(ranks, 1, 1)["au"], (3 * 1.0 + 5 * 0.5) / 8)

    def test_median_measured_skips_warmup(self):
        epochs = [{"warmup": True, "au": 0.1}, {"warmup": False, "au": 0.9}, {"warmup": False, "au": 0.7},
                  {"warmup": False, "au": 0.95}]
        self.assertEqual(mlperf.median_measured(epochs, "au"), 0.9)


class SweepTest(unittest.TestCase):
    def test_largest_n(self):
        self.assertEqual(mlperf.largest_n({1: 0.97, 2: 0.93, 3: 0.86, 4: 0.62}, 0.90), 2)
        self.assertEqual(mlperf.largest_n({1: 0.97, 2: 0.90}, 0.90), 2)  # at the floor passes
        self.assertEqual(mlperf.largest_n({1: 0.89, 2: 0.5}, 0.90), 0)
        self.assertEqual(mlperf.largest_n({}, 0.90), 0)
        # The largest N that passes, also past one that did not (noise at the edge).
        self.assertEqual(mlperf.largest_n({1: 0.95, 2: 0.88, 3: 0.91}, 0.90), 3)


class UsageTest(unittest.TestCase):
    """proc_usage reads a process's CPU and faults from /proc/PID/stat (the workers' figures of
    the report)."""

    def test_own_process(self):
        user0, sys0, minflt0, _ = mlperf.proc_usage(os.getpid())
        buf = bytearray(64 << 20)  # fresh anonymous pages: a minor fault each, when touched
        for i in range(0, len(buf), 4096):
            buf[i] = 1
        t = os.times()
        while os.times().user - t.user < 0.05:  # user CPU
            pass
        user1, sys1, minflt1, majflt1 = mlperf.proc_usage(os.getpid())
        self.assertGreaterEqual(minflt1 - minflt0, 32)  # one a page, or one a 2 MiB huge page at least
        self.assertGreater(user1, user0)
        self.assertGreaterEqual(sys1, sys0)
        self.assertGreaterEqual(majflt1, 0)

    def test_gone(self):
        pid = os.fork()
        if pid == 0:
            os._exit(0)
        os.waitpid(pid, 0)
        self.assertEqual(mlperf.proc_usage(pid), (0.0, 0.0, 0, 0))


def run_line(system, n, step, aus, rate, daemon=False, stats=None):
    epochs = [{"epoch": 0, "warmup": True, "au": 0.2, "samples_per_s": rate / 2, "mib_per_s": 1.0, "samples": 100,
               "steps": 2, "cgroup": {"limit": 300 << 20, "peak": 0, "anon": 80 << 20, "mapped": 20 << 20}}]
    for i, au in enumerate(aus):
        epochs.append({"epoch": i + 1, "warmup": False, "au": au, "samples_per_s": rate + i, "mib_per_s": rate / 10,
                       "samples": 100, "steps": 2,
                       "cgroup": {"limit": 300 << 20, "peak": 0, "anon": 90 << 20, "mapped": 10 << 20}})
    return {"workload": "resnet50", "system": system, "n": n, "step": step, "batch": 50, "floor": 0.9,
            "epochs": epochs, "limit": 300 << 20, "dataset_bytes": 1000 << 20, "daemon": int(daemon),
            "daemon_ticks": 40 if daemon else 0, "requests": 800 if daemon else 0, "clk_tck": 100,
            "stats": stats or {}}


class ReportTest(unittest.TestCase):
    def test_report(self):
        lines = [{"meta": {"machine": "test box", "NS": "1 2 3"}}, {"meta": {"bytes_resnet50": 1048576000}}]
        lines += [run_line("ext4", 1, 0.05, [0.95, 0.97, 0.96], 900), run_line("ext4", 2, 0.05, [0.92, 0.91, 0.93], 1800),
                  run_line("ext4", 3, 0.05, [0.7, 0.8, 0.75], 2000), run_line("ext4", 4, 0, [0, 0, 0], 4000),
                  run_line("aifs:plan", 1, 0.05, [0.93, 0.5, 0.95], 800, True),
                  run_line("aifs:plan", 2, 0.05, [0.6, 0.5, 0.4], 700, True),
                  run_line("aifs:plan", 4, 0, [0, 0, 0], 1000, True),
                  {"workload": "resnet50", "system": "fio", "n": 1, "jobs": 2, "samples_per_s": 5000}]
        with tempfile.TemporaryDirectory() as d:
            results = os.path.join(d, "results.jsonl")
            with open(results, "w") as f:
                f.write("".join(json.dumps(x) + "\n" for x in lines))
            with open(os.path.join(d, mlperf_report.FINDINGS), "w") as f:
                f.write("## Findings\n\nBy hand.\n")
            mlperf_report.main([results, d])
            with open(os.path.join(d, "mlperf.md")) as f:
                md = f.read()
            with open(os.path.join(d, "mlperf.tsv")) as f:
                tsv = f.read().splitlines()
            self.assertTrue(os.path.getsize(os.path.join(d, "mlperf.png")) > 0)
        self.assertIn(mlperf_report.TITLE, md)
        self.assertTrue(md.endswith("## Findings\n\nBy hand.\n"), md[-200:])
        # ext4: largest N 2 (median AU 0.92), 1,801 samples/s there (the median of 1800, 1801,
        # 1802), no compute 4,001; aifs:plan: largest N 1 (median 0.93), × ext4 0.50, no compute
        # 1,001 (0.25× ext4); 800 requests and 40 ticks (0.4 s) over 400 samples: 2.00 requests
        # and 1,000 µs a sample; the processes' peak 100 MiB of a 300 MiB limit: the dataset is
        # 1000/200 = 5.0× the page cache's room.
        self.assertIn("| ext4 | 2 | 0.920 | 1,801 | 180 | 1.00 | 4,001 | 1.00 | — | — | — | — | 5.0 |", md)
        self.assertIn("| aifs:plan | 1 | 0.930 | 801 | 80 | 0.50 | 1,001 | 0.25 | 2.00 | 1,000 | — | — | 5.0 |", md)
        self.assertNotIn("Bounds with no compute", md)  # no ext4-mem run, no round trip measured
        self.assertIn("one simulated H100 needs ≥ 1,607 samples/s", md)
        self.assertIn("one simulated A100 needs ≥ 828 samples/s", md)
        self.assertIn("N=1 (2 jobs) 5,000", md)
        # AU has three digits: 0.8997 is below a floor of 0.90, and must not print as 0.90.
        self.assertIn("| ext4 | 3 | 0.05 | 0.750 (0.700–0.800) |", md)
        self.assertEqual(tsv[0].split("\t")[:3], ["workload", "system", "n"])
        self.assertEqual(len(tsv), 1 + 7 + 1)
        ext4_2 = next(line.split("\t") for line in tsv if line.startswith("resnet50\text4\t2\t"))
        self.assertEqual(ext4_2[mlperf_report.TSV_FIELDS.index("au")], "0.9200")


class BoundsTest(unittest.TestCase):
    """The bounds of the no-compute runs: the dataset in memory (ext4-mem) and the FUSE plane's,
    from the round trip measured in the same run."""

    def test_arithmetic(self):
        # warm files: 30 µs a file on ext4, 80 through FUSE with 1.25 requests a file: 40 µs a trip
        self.assertEqual(mlperf.roundtrip_us(30.0, 80.0, 1.25), 40.0)
        self.assertIsNone(mlperf.roundtrip_us(30.0, 80.0, 0))
        # 2 CPUs, ext4's 200 µs a sample + 2.5 trips of 40 µs: 300 µs, 6,666 samples/s
        self.assertAlmostEqual(mlperf.cpu_bound(2, 200.0, 2.5, 40.0), 2e6 / 300)

    def test_machine_busy(self):
        b0 = mlperf.machine_busy()
        t = os.times()
        while os.times().user - t.user < 0.05:
            pass
        self.assertGreater(mlperf.machine_busy(), b0)

    def test_report(self):
        def busy(line, busy_s):
            for e in line["epochs"]:  # 100 samples an epoch, each measured epoch 0.5 s
                e.update(busy_s=busy_s, wall=0.5)
            line["cpus"] = 2
            return line

        runs = [busy(run_line("ext4", 4, 0, [0, 0], 4000), 0.02),  # 200 µs a sample, 0.04 CPUs busy
                busy(run_line("ext4-mem", 4, 0, [0, 0], 6000), 0.015),
                busy(run_line("aifs:torch", 4, 0, [0, 0], 2500), 0.03, ) | {"daemon": 1, "requests": 750},
                busy(run_line("aifs-kernel", 4, 0, [0, 0], 4400, True), 0.016)]  # 160 µs a sample
        rts = [{"workload": "resnet50", "system": "roundtrip", "fs": "ext4", "procs": 8, "passes": 5,
                "busy_us_per_file": 30.0, "requests_per_file": None},
               {"workload": "resnet50", "system": "roundtrip", "fs": "aifs", "procs": 8, "passes": 5,
                "busy_us_per_file": 80.0, "requests_per_file": 1.25}]
        rows = [mlperf_report.summarize(r) for r in runs]
        self.assertEqual(rows[0]["busy_us_per_sample"], 200.0)
        self.assertEqual(rows[0]["cpus_busy"], 0.04)
        mem, rt, fuse = mlperf_report.bounds(rows, rts, "resnet50")
        self.assertEqual(mem["system"], "ext4-mem")
        self.assertEqual(rt, 40.0)
        # aifs:torch: 750 requests over 300 samples (warm-up included): 2.5 a sample; its bound
        # from the kernel plane's work (the same shards without FUSE): 2 CPUs / (160 + 2.5 × 40 µs)
        # = 7,692 samples/s; the kernel plane is no FUSE plane
        self.assertEqual(mlperf_report.bound_base(rows, "resnet50"), "aifs-kernel")
        self.assertEqual([(s, round(b)) for s, _, b in fuse], [("aifs:torch", 7692)])
        self.assertEqual(mlperf_report.bound_base(rows[:3], "resnet50"), "ext4")  # no kernel plane: ext4's
        md = mlperf_report.markdown({}, rows, [], rts)
        self.assertIn("| ext4 | 0 | — | — | — | — | 4,000 | 1.00 | — | — | 200 | 0.04 | 5.0 |", md)
        self.assertIn("the loader's own ceiling on this machine, more than any storage can feed it | 6,000 | 1.50 "
                      "| — | — |", md)
        self.assertIn("| FUSE plane (aifs:torch): aifs-kernel's 160 µs of busy CPU a sample + 2.50 requests × 40 µs, "
                      "on 2 CPUs | 7,692 | 1.92 | 2,500 | 0.33 |", md)
        self.assertIn("A FUSE round trip costs 40 µs", md)


class SamplerPairsTest(unittest.TestCase):
    """The regression case of issue 46: the plan row against the torch row of the same plane,
    at each N and step both ran."""

    def test_pairs(self):
        stats = {"backend": {"bytes": 4_860_000_000}, "page_cache": {"budget_bytes": 168_000_000},
                 "plan_readahead": {"state": "off: too much wasted", "delivered": 900, "wasted": 300, "closed": 1}}
        rows = [mlperf_report.summarize(r) for r in (
            run_line("ext4", 1, 0.05, [0.9], 900),
            run_line("aifs:torch", 1, 0.05, [0.95], 1000, True, {"backend": {"bytes": 4_070_000_000},
                                                                 "page_cache": {"budget_bytes": 205_000_000}}),
            run_line("aifs:plan", 1, 0.05, [0.94], 870, True, stats),
            run_line("aifs:torch", 4, 0, [0], 6500, True),
            run_line("aifs:plan", 4, 0, [0], 5700, True),
            run_line("aifs:plan", 2, 0.05, [0.9], 1500, True),  # no torch row at N=2: no pair
            run_line("aifs-kernel:plan", 1, 0.05, [0.9], 800, True),  # no torch row on this plane
        )]
        pairs = mlperf_report.sampler_pairs(rows, "resnet50")
        self.assertEqual([(p[0], p[1], p[2]) for p in pairs], [("aifs", 1, 0.05), ("aifs", 4, 0)])
        md = mlperf_report.markdown({}, rows, [])
        self.assertIn("| aifs | 1 | 0.05 | 1 | 1,000 | 870 | 0.87 | — | 0.950 | 0.940 | 4.07 / 4.86 | 205 / 168 "
                      "| 900 / 300, off | — / — | — / — |", md)
        self.assertIn("| aifs | 4 | 0 | 1 | 6,500 | 5,700 | 0.88 | — | 0.000 | 0.000 | — | — | — |", md)

    def test_passes(self):
        """PASSES > 1: the pair compares the medians over the passes, each pass's ratio beside, and
        the workers' CPU and minor faults a sample (what showed the cause of issue 46's open case:
        the plan's workers faulting their heap in again for every sample)."""

        def with_workers(line, cpu_s, faults):
            for e in line["epochs"]:  # 100 samples an epoch
                e.update(worker_user_s=cpu_s * 0.75, worker_sys_s=cpu_s * 0.25, worker_minflt=faults,
                         main_user_s=0.1, main_sys_s=0.0, main_minflt=0, main_majflt=0, worker_majflt=0)
            return line

        runs = [with_workers(run_line("aifs:torch", 4, 0, [0], 500), 1.0, 100),
                with_workers(run_line("aifs:plan", 4, 0, [0], 450), 1.2, 33_000),
                with_workers(run_line("aifs:plan", 4, 0, [0], 460), 1.2, 33_000),
                with_workers(run_line("aifs:torch", 4, 0, [0], 520), 1.0, 200),
                with_workers(run_line("aifs:torch", 4, 0, [0], 510), 1.0, 150),
                with_workers(run_line("aifs:plan", 4, 0, [0], 520), 1.0, 100)]
        rows = [mlperf_report.summarize(r) for r in runs]
        self.assertEqual(rows[0]["worker_ms_per_sample"], 10.0)
        self.assertEqual(rows[1]["worker_faults_per_sample"], 330.0)
        merged = mlperf_report.merge_passes(rows)
        self.assertEqual([(r["system"], r["passes"], r["samples_per_s"]) for r in merged],
                         [("aifs:torch", 3, 510), ("aifs:plan", 3, 460)])
        self.assertEqual(merged[0]["pass_rates"], [500, 520, 510])
        self.assertEqual(mlperf_report.pass_ratios(merged[0], merged[1]), "0.90, 0.88, 1.02")
        md = mlperf_report.markdown({}, rows, [])
        self.assertIn("| aifs | 4 | 0 | 3 | 510 | 460 | 0.90 | 0.90, 0.88, 1.02 | 0.000 | 0.000 | — | — | — "
                      "| 10.00 / 12.00 | 1.5 / 330.0 |", md)
        # every pass keeps its row in the table of every run
        self.assertEqual(md.count("| aifs:plan | 4 | 0 |"), 3)


if __name__ == "__main__":
    unittest.main()
