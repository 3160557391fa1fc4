#!/usr/bin/env python3
"""Reads a sample of an aifs mount straight into GPU memory with kvikio (GPUDirect Storage where
the file system and driver allow it, kvikio's POSIX path otherwise).

    python3 gpu_read.py MOUNT_PATH_OF_A_SAMPLE      # e.g. /mnt/aifs/train/n01440764/x.JPEG
    python3 gpu_read.py --self-test                 # the check python/test_aifs_direct.py runs

cuFile and kvikio refuse FUSE, so the mount cannot be read this way; its shard files, on ext4 or
XFS, can. `aifs_direct` says where the sample lies (the mount's `.aifs/locations`), and the read
goes to the shard file itself:

- the offset is rounded down to 4 KiB, and the length up, so that the read is aligned, as
  GPUDirect Storage wants (an unaligned read works but bounces through host memory);
- the sample is then a slice of the GPU buffer, taken on the GPU (no copy to the host);
- its CRC32C can be checked against the index on the host (`aifs_direct.crc32c`) when wanted.

Needs cupy and kvikio (RAPIDS), a CUDA GPU, and a local shard set: a set in S3 has no shard
files (read it through the mount). Only this example and its test need them.
"""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from aifs import direct as aifs_direct  # noqa: E402

ALIGN = 4096


def read_to_gpu(shard, offset, length):
    """Returns a cupy uint8 array of `length` bytes at `offset` of the file `shard`, read into
    GPU memory with one aligned kvikio read."""
    import cupy
    import kvikio

    start = offset - offset % ALIGN
    end = -(-(offset + length) // ALIGN) * ALIGN
    end = min(end, os.path.getsize(shard))
    buf = cupy.empty(end - start, dtype=cupy.uint8)
    with kvikio.CuFile(shard, "r") as f:
        n = f.pread(buf, end - start, file_offset=start).get()
    if n != end - start:
        raise OSError(f"{shard}: read {n} bytes of [{start}, {end})")
    return buf[offset - start : offset - start + length]  # a view on the GPU


def read_sample_to_gpu(path):
    """Returns the bytes of the aifs sample at `path` in GPU memory."""
    m = aifs_direct.open(os.path.dirname(path))
    loc = m.locate(path)
    if loc is None or loc.shard.startswith("s3://"):
        raise ValueError(f"{path}: not a file of a local aifs shard set")
    return read_to_gpu(loc.shard, loc.offset, loc.length), loc


def self_test():
    """Writes a file of known bytes and reads unaligned ranges of it to the GPU."""
    import tempfile

    data = bytes((i * 7 + 3) % 251 for i in range(3 * ALIGN + 123))
    with tempfile.NamedTemporaryFile() as f:
        f.write(data)
        f.flush()
        for off, n in ((0, 10), (ALIGN - 1, 2), (1000, 2 * ALIGN + 5), (len(data) - 7, 7)):
            got = read_to_gpu(f.name, off, n).get().tobytes()
            if got != data[off : off + n]:
                sys.exit(f"gpu_read self-test: [{off}, +{n}) differs")
    print("ok")


def main(argv):
    if argv[1:] == ["--self-test"]:
        self_test()
        return
    if len(argv) != 2:
        sys.exit(__doc__)
    buf, loc = read_sample_to_gpu(argv[1])
    crc = aifs_direct.crc32c(buf.get().tobytes())
    print(f"{argv[1]}: {loc.length} bytes from {loc.shard} at {loc.offset} on the GPU; CRC32C "
          f"{crc:08x} ({'matches' if crc == loc.crc32c or not loc.crc32c else 'DIFFERS from'} the index)")


if __name__ == "__main__":
    main(sys.argv)
