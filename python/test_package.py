"""Tests for the package aifs itself: its version, the plan protocol check, the old module names."""

import importlib
import json
import os
import sys
import tempfile
import unittest
import warnings

import aifs

# The source tree (scripts/test.sh runs these tests from a copy against the installed package).
SOURCE = os.environ.get("AIFS_SOURCE", os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))


class PackageTest(unittest.TestCase):
    def test_installed(self):
        """Under scripts/test.sh (AIFS_INSTALLED=1) aifs comes from the installed package, not python/."""
        if os.environ.get("AIFS_INSTALLED") == "1":
            self.assertIn("site-packages", aifs.__file__)

    def test_version_is_the_shared_file(self):
        """aifs.__version__ is python/aifs/VERSION, the file the Go binary embeds (version.go)."""
        with open(os.path.join(os.path.dirname(aifs.__file__), "VERSION"), encoding="ascii") as f:
            self.assertEqual(aifs.__version__, f.read().strip())
        self.assertRegex(aifs.__version__, r"^\d+\.\d+\.\d+")

    def test_protocol_matches_go(self):
        """PLAN_PROTOCOL is plan.Protocol in the Go source."""
        with open(os.path.join(SOURCE, "plan", "plan.go"), encoding="utf-8") as f:
            self.assertIn(f"const Protocol = {aifs.PLAN_PROTOCOL}\n", f.read())

    def _mount(self, stats):
        d = tempfile.TemporaryDirectory()
        self.addCleanup(d.cleanup)
        os.mkdir(os.path.join(d.name, ".aifs"))
        with open(os.path.join(d.name, ".aifs", "stats"), "w") as f:
            json.dump(stats, f)
        return d.name

    def test_check_protocol(self):
        aifs.check_protocol(self._mount({"plan_protocol": aifs.PLAN_PROTOCOL, "version": aifs.__version__}))
        aifs.check_protocol(self._mount({}))  # a daemon older than the field speaks 1
        with self.assertRaisesRegex(aifs.ProtocolError, "speaks plan protocol 2 .*daemon 9.9.9"):
            aifs.check_protocol(self._mount({"plan_protocol": 2, "version": "9.9.9"}))
        with self.assertRaises(OSError):
            aifs.check_protocol(tempfile.gettempdir() + "/aifs-no-such-mount")

    def test_sampler_refuses_other_protocol(self):
        from torch.utils.data import SequentialSampler

        mnt = self._mount({"plan_protocol": 99})
        open(os.path.join(mnt, ".aifs", "plan"), "w").close()
        numbers = list(range(4))
        with self.assertRaises(aifs.ProtocolError):
            aifs.PlanSampler(SequentialSampler(numbers), numbers, root=mnt)

    def test_stall(self):
        """The share is the growth of blocked_seconds over wall time times readers."""
        mnt = self._mount({"stall": {"blocked_seconds": 10.0}})
        now = [100.0]
        s = aifs.Stall(mnt, readers=4, clock=lambda: now[0])

        def advance(wall, blocked):
            now[0] += wall
            with open(os.path.join(mnt, ".aifs", "stats"), "w") as f:
                json.dump({"stall": {"blocked_seconds": blocked}}, f)

        advance(50.0, 16.4)  # 6.4 s blocked over 4 readers x 50 s
        self.assertAlmostEqual(s.lap(), 0.032)
        advance(10.0, 16.4)
        self.assertEqual(s.lap(), 0.0)
        with self.assertRaises(ValueError):
            aifs.stall(mnt, readers=0)

    def test_old_names_warn(self):
        for old, new in (("aifs_plan", "aifs.plan"), ("aifs_direct", "aifs.direct")):
            sys.modules.pop(old, None)
            with warnings.catch_warnings(record=True) as w:
                warnings.simplefilter("always")
                m = importlib.import_module(old)
            self.assertIs(m, importlib.import_module(new))
            self.assertTrue(any(issubclass(x.category, DeprecationWarning) and old in str(x.message) for x in w), w)


if __name__ == "__main__":
    unittest.main()
