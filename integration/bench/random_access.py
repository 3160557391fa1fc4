"""Random 4 KiB reads of one large file, timed: random_access.py PATH HOW N SEED.

HOW is `open` (Python's default buffered open(), seek + read(4096)), `pread` (os.pread on a
descriptor) or `memmap` (a numpy memmap, one byte of each 4 KiB read). Prints the seconds the N
reads took (the open and the mapping are not timed). random_access.sh runs it on native ext4
and on aifs mounts of the same file.
"""

import os
import random
import sys
import time

import numpy


def main():
    path, how, n, seed = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    size = os.path.getsize(path)
    rng = random.Random(seed)
    offsets = [rng.randrange(0, size // 4096) * 4096 for _ in range(n)]
    if how == "open":
        with open(path, "rb") as f:
            t = time.perf_counter()
            for off in offsets:
                f.seek(off)
                f.read(4096)
            took = time.perf_counter() - t
    elif how == "pread":
        fd = os.open(path, os.O_RDONLY)
        t = time.perf_counter()
        for off in offsets:
            os.pread(fd, 4096, off)
        took = time.perf_counter() - t
        os.close(fd)
    elif how == "memmap":
        m = numpy.memmap(path, dtype=numpy.uint8, mode="r")
        t = time.perf_counter()
        total = 0
        for off in offsets:
            total += int(m[off])
        took = time.perf_counter() - t
    else:
        sys.exit(f"unknown HOW {how!r}")
    print(f"{took:.6f}")


if __name__ == "__main__":
    main()
