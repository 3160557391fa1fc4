"""Direct reads of an aifs mount's samples: names through the mount, bytes straight from the shards.

Usage (standard library only; PIL and torchvision only for the loader helpers):

    import aifs_direct
    m = aifs_direct.open("/mnt/aifs")
    data = m.read("/mnt/aifs/train/n01440764/x.JPEG")          # one os.pread of the shard
    ds = aifs_direct.use_direct(ImageFolder("/mnt/aifs/train"))   # the same samples, read directly

Every aifs mount serves `.aifs/locations` (format in aifs's fs/locations.go; docs/direct.md):
for each inode number, the shard, offset, length and CRC32C of the file's bytes. `open` reads it
once. `read(path)` then costs an `os.stat` of the path (answered by the kernel's caches once the
directory has been listed, as ImageFolder does; no request reaches aifs) and one `os.pread` of
the shard file, through a descriptor kept open per shard with `posix_fadvise(RANDOM)`: no FUSE
request, no daemon CPU. What it does not cover falls back to an ordinary open and read, through
the mount: a path outside the mount, a set in S3 (its shards are objects, not files), a shard
file this process may not open.

A remount is found by the mtime of `.aifs/locations` (the daemon's start, to the nanosecond),
checked with a stat before and after every direct read, answered by the kernel's caches: the
locations are read again, and their identity (the index's checksum) says whether the set
changed. `stale` counts the reloads. (The mount's device number is no proof: the kernel hands
a freed one to the next mount.) A record whose length is not the file's size is not trusted
either: the file is read through the mount.

Plans: aifs's read-ahead puts samples into the page cache of the mount's files, not of the shard
files, so a plan does not warm what `read` reads; the shard files' own page cache (and the
device's speed) serve it. docs/direct.md has the reasons and the figures.
"""

import errno
import io
import os
import struct
import threading
import weakref
from collections import namedtuple

Location = namedtuple("Location", "shard offset length crc32c")
Location.__doc__ = """Where a file's bytes lie: `shard` is the shard's path (local sets) or its s3:// URL,
`offset` and `length` the byte range in it, `crc32c` its CRC32C (0 where the set has none)."""

_NO_SHARD = 0xFFFFFFFF

# On the kernel data plane (aifs mount -o data=kernel) the control files are not in the mount:
# they are in a FUSE mount of the same set at _KERNEL_CONTROL_ROOT/MAJOR:MINOR, by the device
# number of the mount root (aifs's docs/plan.md; plan.KernelControlRoot in Go;
# test_plan_spec.py checks that aifs_plan's is the same).
_KERNEL_CONTROL_ROOT = "/run/aifs"


def control_root(mount_root):
    """Returns the root of the mount that serves the control files (`.aifs`) of the aifs mount
    at `mount_root`: `mount_root` itself on the FUSE plane; on the kernel plane, its control
    mount, which shows the same tree with the FUSE plane's inode numbers (those of the locations
    file). Where neither has `.aifs`, `mount_root`."""
    if os.path.lexists(os.path.join(mount_root, ".aifs")):
        return mount_root
    try:
        st = os.stat(mount_root)
    except OSError:
        return mount_root
    k = os.path.join(_KERNEL_CONTROL_ROOT, f"{os.major(st.st_dev)}:{os.minor(st.st_dev)}")
    return k if os.path.ismount(mount_root) and os.path.lexists(os.path.join(k, ".aifs")) else mount_root


def control_paths(paths, mount_root):
    """Returns `paths`, files under `mount_root`, as the control mount shows them (control_root):
    there their inode numbers are those of the locations file. On the FUSE plane, `paths`."""
    ctl = control_root(mount_root)
    if ctl == mount_root:
        return paths
    return [os.path.join(ctl, os.path.relpath(os.path.realpath(p), mount_root)) for p in paths]


class Locations:
    """The `.aifs/locations` file of an aifs mount, read whole, once: where each inode's bytes
    lie. Raises OSError if it cannot be read, ValueError if it is not a locations file."""

    HEADER = struct.Struct("<8sIIQQII24x")
    RECORD = struct.Struct("<QQII")

    def __init__(self, mount_root):
        with io.open(os.path.join(control_root(mount_root), ".aifs", "locations"), "rb") as f:
            self._data = memoryview(f.read())
        if len(self._data) < self.HEADER.size:
            raise ValueError("the locations file is shorter than its header")
        magic, version, rec, self.records, table, shards, self.identity = self.HEADER.unpack_from(self._data)
        if magic != b"AIFSLOC\0" or version != 1 or rec != self.RECORD.size:
            raise ValueError(f"not a locations file of version 1 ({bytes(magic)!r}, {version}, {rec})")
        if table != self.HEADER.size + rec * self.records or table > len(self._data):
            raise ValueError("the locations file is truncated")
        self.shard_names, self.shard_sizes = [], []
        pos = table
        for _ in range(shards):
            size, n = struct.unpack_from("<QH", self._data, pos)
            self.shard_names.append(bytes(self._data[pos + 10 : pos + 10 + n]).decode("utf-8", "surrogateescape"))
            self.shard_sizes.append(size)
            pos += 10 + n
        (n,) = struct.unpack_from("<H", self._data, pos)
        self.source = bytes(self._data[pos + 2 : pos + 2 + n]).decode("utf-8", "surrogateescape")

    def record(self, ino):
        """Returns (offset, length, shard number, crc32c) of inode `ino`, or None if it is not
        a regular file of the set."""
        if not 1 <= ino <= self.records:
            return None
        r = self.RECORD.unpack_from(self._data, self.HEADER.size + self.RECORD.size * (ino - 1))
        return None if r[2] == _NO_SHARD else r

    def place(self, ino):
        """Returns (shard number, offset) of inode `ino`, or None if it is not a regular file."""
        r = self.record(ino)
        return None if r is None else (r[2], r[0])

    def shard_path(self, shard):
        """Returns where shard number `shard` lies: a path, or an s3:// URL."""
        name = self.shard_names[shard]
        if self.source.startswith("s3://"):
            return self.source.rstrip("/") + "/" + name
        return os.path.join(self.source, name)  # an absolute name (a tar elsewhere) stays itself


def inodes(paths):
    """Returns the inode number of each of `paths`: from one listing of each directory (d_ino,
    no request per file), else a stat."""
    by_dir = {}
    for i, p in enumerate(paths):
        d, name = os.path.split(p)
        by_dir.setdefault(d, []).append((name, i))
    found = [0] * len(paths)
    for d, items in by_dir.items():
        with os.scandir(d) as it:
            listed = {e.name: e.inode() for e in it}
        for name, i in items:
            found[i] = listed.get(name) or os.stat(paths[i]).st_ino
    return found


class Mount:
    """An aifs mount opened for direct reads (see the module doc). Safe to use from several
    threads, and in DataLoader workers: forked ones share its shard descriptors (pread moves no
    file position), spawned ones get it pickled as its mount point and open their own."""

    def __init__(self, mountpoint):
        self.mountpoint = os.path.realpath(mountpoint)
        self.stale = 0  # reloads after a remount
        self._lock = threading.Lock()
        self._load()
        _mounts.add(self)

    def __getstate__(self):
        return {"mountpoint": self.mountpoint}

    def __setstate__(self, state):
        self.__init__(state["mountpoint"])

    def _load(self):
        self._control = control_root(self.mountpoint)
        self._loc_path = os.path.join(self._control, ".aifs", "locations")
        self._stamp = self._stamp_now()
        self._dev = os.stat(self.mountpoint).st_dev
        self.locations = Locations(self.mountpoint)
        self._local = not self.locations.source.startswith("s3://")
        self._fds = {}

    def _stamp_now(self):
        """Returns what identifies the mount now: the locations file's mtime (the daemon's start)."""
        return os.stat(self._loc_path).st_mtime_ns

    def _fresh(self):
        """Reloads the locations if the mount was replaced since they were read."""
        if self._stamp_now() == self._stamp:
            return
        with self._lock:
            if self._stamp_now() != self._stamp:
                self._close_fds()
                self._load()
                self.stale += 1

    def close(self):
        """Closes the shard descriptors this process opened."""
        with self._lock:
            self._close_fds()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _record(self, path):
        """Returns the record of `path`, or None when it is not a regular file of this mount
        (another file system, or a record that does not fit the file). Reloads the locations
        after a remount."""
        self._fresh()
        st = os.stat(path)
        if st.st_dev != self._dev:
            return None
        if self._control != self.mountpoint:  # the kernel plane: the FUSE plane's inode
            st = os.stat(control_paths([path], self.mountpoint)[0])
        r = self.locations.record(st.st_ino)
        return r if r is not None and r[1] == st.st_size else None

    def _close_fds(self):
        for fd in self._fds.values():
            os.close(fd)
        self._fds = {}

    def locate(self, path):
        """Returns the Location of `path`, or None if it is not a regular file of this mount."""
        r = self._record(path)
        if r is None:
            return None
        offset, length, shard, crc = r
        return Location(self.locations.shard_path(shard), offset, length, crc)

    def read(self, path, check=False):
        """Returns the bytes of `path`: one pread of its shard where it is a file of a local
        set on this mount, else an ordinary read. With `check`, the bytes read directly are
        checked against the CRC32C of the index; a mismatch raises OSError(EIO) naming the
        path, the shard and the offset (where the set has no checksums nothing is checked)."""
        stamp = self._stamp
        r = self._record(path)
        fd = None if r is None or not self._local else self._shard_fd(r[2])
        if fd is None:
            with io.open(path, "rb") as f:
                return f.read()
        offset, length, shard, crc = r
        try:
            data = os.pread(fd, length, offset)
        except OSError:
            if self._stamp_now() == stamp:
                raise
            data = None  # another thread closed the descriptor for a remount
        if self._stamp_now() != stamp:  # remounted while this was read: read it again
            return self.read(path, check)
        if len(data) != length:
            raise OSError(errno.EIO, f"{path}: shard {self.locations.shard_path(shard)} ends before "
                          f"[{offset}, +{length})")
        if check and crc and crc32c(data) != crc:
            raise OSError(errno.EIO, f"{path}: corrupt sample (CRC32C {crc32c(data):#010x}, the index says "
                          f"{crc:#010x}) at offset {offset} of {self.locations.shard_path(shard)}")
        return data

    def _shard_fd(self, shard):
        """Returns a descriptor of shard number `shard`, or None if it cannot be opened (the
        caller reads through the mount)."""
        fd = self._fds.get(shard)
        if fd is not None:
            return fd
        with self._lock:
            fd = self._fds.get(shard)
            if fd is None:
                try:
                    fd = os.open(self.locations.shard_path(shard), os.O_RDONLY | os.O_CLOEXEC)
                except OSError:
                    return None
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_RANDOM)
                self._fds[shard] = fd
            return fd


# Every Mount of this process, so that a forked child gets fresh locks (a lock held by another
# thread of the parent at the fork would never be released in the child).
_mounts = weakref.WeakSet()


def _after_fork():
    for m in list(_mounts):
        m._lock = threading.Lock()


os.register_at_fork(after_in_child=_after_fork)


def open(mountpoint):  # noqa: A001 (the module's entry point, as io.open)
    """Returns a Mount of the aifs mount at `mountpoint` (or any directory in it: the mount
    root is found by walking up to the directory holding `.aifs/locations`)."""
    d = os.path.realpath(mountpoint)
    while not os.path.exists(os.path.join(control_root(d), ".aifs", "locations")):
        parent = os.path.dirname(d)
        if parent == d or os.path.ismount(d):
            raise FileNotFoundError(errno.ENOENT, "not in an aifs mount (no .aifs/locations)", mountpoint)
        d = parent
    return Mount(d)


def pil_loader(mount):
    """Returns an ImageFolder loader that reads each image with `mount.read` and decodes it
    as torchvision's default loader does (RGB)."""
    return _PILLoader(mount)


class _PILLoader:
    def __init__(self, mount):
        self.mount = mount

    def __call__(self, path):
        from PIL import Image

        img = Image.open(io.BytesIO(self.mount.read(path)))
        return img.convert("RGB")


def use_direct(dataset, mountpoint=None):
    """Swaps the loader of a torchvision DatasetFolder / ImageFolder (or of the dataset under
    Subsets) for one that reads directly from the shards and decodes as `pil_loader` does, and
    returns the dataset. `mountpoint` defaults to the mount holding `dataset.root`. A dataset
    not on an aifs mount is returned unchanged."""
    base = dataset
    while hasattr(base, "dataset") and hasattr(base, "indices"):
        base = base.dataset
    try:
        mount = open(mountpoint or base.root)
    except FileNotFoundError:
        return dataset
    base.loader = pil_loader(mount)
    return dataset


def crc32c(data, crc=0):
    """Returns the CRC32C (Castagnoli) of `data`, as aifs's index records it. Uses the crc32c
    or google_crc32c module where one is installed; else pure Python (about 10 ms for a 110 KB
    sample: use `check` for audits, not for every epoch)."""
    return _crc32c(data, crc)


def _crc32c_python(data, crc=0):
    table = _TABLE
    crc ^= 0xFFFFFFFF
    for b in bytes(data):
        crc = table[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def _make_table():
    table = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    return table


_TABLE = _make_table()
try:
    import crc32c as _fast  # type: ignore

    def _crc32c(data, crc=0):
        return _fast.crc32c(data, crc)
except ImportError:
    try:
        import google_crc32c as _fast  # type: ignore

        def _crc32c(data, crc=0):
            return _fast.extend(crc, bytes(data))
    except ImportError:
        _crc32c = _crc32c_python
