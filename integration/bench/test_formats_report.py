"""Tests of formats_report.py, the writer of formats.sh's report (run by scripts/test.sh)."""

import unittest

import formats_report

META = {
    "machine": "2 cores (test)", "date": "2026-11-29", "commit": "abc1234", "load": "1", "load_end": "1",
    "FORMATS": "zip arrow", "ARCHIVES": "2", "MEMBERS": "5", "MEMBER_SIZE": "1024", "JPEGS": "300",
    "JOBS": "1 8", "RUNS": "2", "SMOKE": "0", "NOTE": "", "bytes-zip": "1000", "bytes-arrow": "1000",
    "index_bytes-zip": "100", "index_bytes-arrow": "100", "jpeg_bytes": "100000", "seconds": "70",
}


def figures(zip_index, arrow_nosum, zip_epoch):
    """A run's figures: ZIP's index seconds (cat takes 1), HF Arrow's without checksums, and the
    ZIP's files/s in each pass (the packed sets read 1,000)."""
    fig = {}
    for f in ("zip", "arrow"):
        fig[(f"index-{f}", "cat")] = [1.0, 1.0]
        fig[(f"index-{f}", "aifs")] = [zip_index, zip_index] if f == "zip" else [1.1, 1.1]
        fig[(f"index-{f}", "nosum")] = [arrow_nosum, arrow_nosum]
        fig[(f"index-{f}", "warm")] = [0.5, 0.5]
        for c in ("cpu-index-" + f, "rss-index-" + f):
            fig[(c, "aifs")] = fig[(c, "warm")] = [1024.0, 1024.0]
        for c in ("mount-", "list-", "rss-mounted-", "rss-listed-"):
            fig[(c + f, "aifs")] = [1.0, 1.0]
        fig[("jpeg-index-" + f, "a")] = fig[("jpeg-index-" + f, "b")] = [1.0]
    fig[("jpeg-pack", "a")] = fig[("jpeg-pack", "b")] = [2.0]
    for j in ("1", "8"):
        fig[(f"cold-{j}", "ext4")] = [900.0, 900.0]
        for s in ("packed", "unaligned", "zip", "arrow"):
            for c in ("a", "b"):
                fig[(f"cold-{j}", f"{s}-{c}")] = zip_epoch if s == "zip" else [1000.0, 1000.0]
                fig[(f"cpu-cold-{j}", f"{s}-{c}")] = [100.0, 100.0]
                fig[(f"disk-cold-{j}", f"{s}-{c}")] = [1.0, 1.0]
    return fig


class FormatsReportTest(unittest.TestCase):
    def test_targets(self):
        md = "\n".join(formats_report.report(META, figures(1.5, 12.0, [900.0, 1000.0])))
        self.assertIn("- ZIP: index with checksums / `cat` ≤ 1.2: **missed** (1.500)", md)
        self.assertIn("- HF Arrow: index with checksums / `cat` ≤ 1.2: **met** (1.100)", md)
        self.assertIn("- HF Arrow without checksums ≤ 10 s: **missed** (12.000) s", md)
        # the median of the passes' ratios: 0.9, 1.0 (copy a) and 0.9, 1.0 (copy b)
        self.assertIn("| ZIP | 950 | 950 | **0.95** | 100 | 1.00 | **met** (0.950) |", md)
        self.assertIn("| packed, --align 1 | 1,000 | 1,000 | **1.00** | 100 | 1.00 | (control) |", md)

    def test_bound(self):
        fig = figures(1.5, 5.0, [900.0, 1000.0])
        fig[("index-zip", "warm")] = [1.3, 1.4]
        md = "\n".join(formats_report.report(META, fig))
        self.assertIn("- ZIP: index with checksums / `cat` ≤ 1.2: **missed** (1.500); bounded here: the warm index alone takes 1.35× `cat`", md)
        self.assertIn("- HF Arrow: index with checksums / `cat` ≤ 1.2: **met** (1.100)\n", md)

    def test_missed_epoch(self):
        md = "\n".join(formats_report.report(META, figures(1.1, 5.0, [800.0, 900.0])))
        self.assertIn("- ZIP: index with checksums / `cat` ≤ 1.2: **met** (1.100)", md)
        self.assertIn("- HF Arrow without checksums ≤ 10 s: **met** (5.000) s", md)
        self.assertIn("**0.85** | 100 | 1.00 | **missed** (0.850) |", md)


if __name__ == "__main__":
    unittest.main()
