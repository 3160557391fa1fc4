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
        """The share is the growth of the job's blocked seconds over wall time times readers: the
        caller's process tree by default, its cgroup, a cgroup by path, or the whole mount."""

        def stats(mount, tree, cg, other):
            return {"stall": {"source": "fuse", "blocked_seconds": mount,
                              "caller": {"pid": 1, "cgroup": "/a", "tree": {"blocked_seconds": tree},
                                         "cgroup_totals": {"blocked_seconds": cg}},
                              "cgroups": [{"cgroup": "/a", "blocked_seconds": cg}, {"cgroup": "/b", "blocked_seconds": other}]}}

        mnt = self._mount(stats(10.0, 1.0, 2.0, 8.0))
        now = [100.0]
        jobs = {job: aifs.Stall(mnt, readers=4, job=job, clock=lambda: now[0]) for job in ("tree", "cgroup", "mount", "/b")}

        def advance(wall, st):
            now[0] += wall
            with open(os.path.join(mnt, ".aifs", "stats"), "w") as f:
                json.dump(st, f)

        advance(50.0, stats(36.4, 7.4, 10.0, 28.0))  # over 4 readers x 50 s: 6.4 s, 8 s, 26.4 s, 20 s
        for job, want in (("tree", 0.032), ("cgroup", 0.04), ("mount", 0.132), ("/b", 0.1)):
            self.assertAlmostEqual(jobs[job].lap(), want, msg=job)
            self.assertEqual(jobs[job].source, "fuse")
        advance(10.0, stats(36.4, 7.4, 10.0, 28.0))
        self.assertEqual(jobs["tree"].lap(), 0.0)
        with self.assertRaises(ValueError):
            aifs.stall(mnt, readers=0)
        with self.assertRaises(ValueError):
            aifs.stall(mnt, job="pid")

    def test_stall_psi(self):
        """Under the kernel plane's system-wide pressure (source psi) every job gets the mount's
        figure, a share of wall time that `readers` does not divide."""
        mnt = self._mount({"stall": {"source": "psi", "blocked_seconds": 1.0}})
        now = [0.0]
        s = aifs.Stall(mnt, readers=8, clock=lambda: now[0])
        now[0] = 10.0
        with open(os.path.join(mnt, ".aifs", "stats"), "w") as f:
            json.dump({"stall": {"source": "psi", "blocked_seconds": 3.0}}, f)
        self.assertAlmostEqual(s.lap(), 0.2)

    def test_stall_old_daemon(self):
        """A daemon with no stall per job: job='mount' works, the others say why not."""
        mnt = self._mount({"stall": {"blocked_seconds": 1.0}})
        self.assertEqual(aifs.Stall(mnt, job="mount").source, "fuse")
        with self.assertRaisesRegex(aifs.ProtocolError, "job='mount'"):
            aifs.Stall(mnt)

    def test_cgroup(self):
        """aifs.cgroup() is the memory controller's path on cgroup v1, else the v2 path."""
        with open("/proc/self/cgroup", encoding="utf-8") as f:
            lines = [line.rstrip("\n").split(":", 2) for line in f]
        memory = [p for _, c, p in lines if "memory" in c.split(",")]
        v2 = [p for n, c, p in lines if n == "0" and c == ""]
        self.assertEqual(aifs.cgroup(), (memory or v2 or [""])[0])

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
