"""Tests for aifs_direct's standard-library parts (integration/direct_test.go reads a live mount
with it: every file, ImageFolder, a corrupt sample, a remount).

Run: /usr/bin/python3 -m unittest discover -s python -v
"""

import os
import struct
import tempfile
import unittest

from aifs import direct as aifs_direct


def write_locations(mount, records, shards, source, identity=7):
    """Writes mount/.aifs/locations (format in fs/locations.go): records (offset, size, shard,
    crc) for inodes 1.., shards as (name, size)."""
    os.makedirs(os.path.join(mount, ".aifs"), exist_ok=True)
    head = struct.pack("<8sIIQQII24x", b"AIFSLOC\0", 1, 24, len(records), 64 + 24 * len(records), len(shards), identity)
    body = b"".join(struct.pack("<QQII", *r) for r in records)
    table = b"".join(struct.pack("<QH", size, len(name)) + name.encode() for name, size in shards)
    with open(os.path.join(mount, ".aifs", "locations"), "wb") as f:
        f.write(head + body + table + struct.pack("<H", len(source)) + source.encode())


class CRC32CTest(unittest.TestCase):
    def test_known_values(self):
        self.assertEqual(aifs_direct.crc32c(b"123456789"), 0xE3069283)
        self.assertEqual(aifs_direct.crc32c(b""), 0)
        self.assertEqual(aifs_direct._crc32c_python(b"123456789"), 0xE3069283)
        data = bytes(range(256)) * 40
        self.assertEqual(aifs_direct.crc32c(data[100:], aifs_direct.crc32c(data[:100])), aifs_direct.crc32c(data))


class LocationsTest(unittest.TestCase):
    def test_records_shards_and_source(self):
        with tempfile.TemporaryDirectory() as mnt:
            write_locations(mnt, [(0, 0, 0xFFFFFFFF, 0), (10, 5, 1, 0xABC), (0, 3, 0, 1)],
                            [("shard-000000.dat", 100), ("/abs/t.tar", 200)], "/data/set")
            loc = aifs_direct.Locations(mnt)
            self.assertEqual((loc.records, loc.identity, loc.source), (3, 7, "/data/set"))
            self.assertIsNone(loc.record(1))  # a directory
            self.assertIsNone(loc.record(0))
            self.assertIsNone(loc.record(4))
            self.assertEqual(loc.record(2), (10, 5, 1, 0xABC))
            self.assertEqual(loc.place(3), (0, 0))
            self.assertEqual(loc.shard_path(0), "/data/set/shard-000000.dat")
            self.assertEqual(loc.shard_path(1), "/abs/t.tar")  # a tar named from the root
            self.assertEqual(loc.shard_sizes, [100, 200])
            write_locations(mnt, [], [("shard-000000.dat", 1)], "s3://b/p/")
            self.assertEqual(aifs_direct.Locations(mnt).shard_path(0), "s3://b/p/shard-000000.dat")

    def test_refuses_other_files(self):
        with tempfile.TemporaryDirectory() as mnt:
            os.makedirs(os.path.join(mnt, ".aifs"))
            for content in (b"", b"AIFSLOC\0" + b"\0" * 10, struct.pack("<8sIIQQII24x", b"AIFSLOC\0", 2, 24, 0, 64, 0, 0)):
                with open(os.path.join(mnt, ".aifs", "locations"), "wb") as f:
                    f.write(content)
                with self.assertRaises(ValueError):
                    aifs_direct.Locations(mnt)


class MountStateTest(unittest.TestCase):
    """A Mount crosses into DataLoader workers: pickled (spawn) as its mount point, forked with
    its descriptors and a fresh lock."""

    def test_pickle_and_fork(self):
        import pickle

        with tempfile.TemporaryDirectory() as mnt:
            write_locations(mnt, [(0, 0, 0xFFFFFFFF, 0)], [("shard-000000.dat", 1)], mnt, identity=9)
            m = aifs_direct.Mount(mnt)
            again = pickle.loads(pickle.dumps(m))
            self.assertEqual((again.mountpoint, again.locations.identity), (m.mountpoint, 9))
            self.assertIsNot(again.locations, m.locations)
            with m._lock:  # held by this thread while forking
                pid = os.fork()
                if pid == 0:
                    os._exit(0 if m._lock.acquire(timeout=2) else 1)
                _, status = os.waitpid(pid, 0)
            self.assertEqual(os.waitstatus_to_exitcode(status), 0, "the child could not take the Mount's lock")


class OffMountTest(unittest.TestCase):
    def test_open_outside_a_mount(self):
        with tempfile.TemporaryDirectory() as d:
            with self.assertRaises(FileNotFoundError):
                aifs_direct.open(d)

    def test_use_direct_off_a_mount_changes_nothing(self):
        class Folder:
            root, loader = "/", object()

        ds = Folder()
        self.assertIs(aifs_direct.use_direct(ds), ds)
        self.assertIs(ds.loader, Folder.loader)


class GPUExampleTest(unittest.TestCase):
    """Runs the kvikio example (python/examples/gpu_read.py) where a GPU and kvikio are; this is
    the only test that skips, and only there."""

    def test_gpu_read(self):
        try:
            import cupy  # noqa: F401
            import kvikio  # noqa: F401
        except ImportError:
            self.skipTest("no kvikio/cupy (a GPU machine with RAPIDS runs this)")
        import subprocess
        import sys

        example = os.path.join(os.path.dirname(os.path.abspath(__file__)), "examples", "gpu_read.py")
        r = subprocess.run([sys.executable, example, "--self-test"], capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)


if __name__ == "__main__":
    unittest.main()
