"""Warm shuffled epochs read by Python, as torchvision's pil_loader reads a sample: open() and
read() of the whole file, one file at a time, in PROCS processes (a DataLoader's workers). Run
by compare.sh with /usr/bin/python3.

usage: pyread.py PROCS RUNS DIR...

The files of each DIR are listed once (sorted). One untimed epoch of each DIR warms its caches;
then each of RUNS passes reads one shuffled order (seeded with the pass number, the same on every
DIR) from each DIR in turn, the processes taking the order's files in turn, and prints one line
per DIR: the median files/s over the passes and then each pass's. On Python before 3.14 each
open() of a file in binary mode also asks ioctl(TCGETS) (isatty, to choose buffering), which a
FUSE mount passes to its daemon: the cost this row shows and the Go reader ('aifs bench') does
not pay.
"""

import multiprocessing
import os
import random
import statistics
import sys
import time


def files_of(root):
    out = []
    for d, dirs, names in os.walk(root):
        dirs.sort()
        out += [os.path.join(d, n) for n in sorted(names)]
    return out


def read_all(paths):
    n = 0
    for p in paths:
        with open(p, "rb") as f:
            n += len(f.read())
    return n


def epoch(pool, procs, paths, seed):
    """Reads every path once in the order seeded by seed; returns files/s."""
    order = paths[:]
    random.Random(seed).shuffle(order)
    parts = [order[i::procs] for i in range(procs)]
    start = time.perf_counter()
    pool.map(read_all, parts)
    return len(order) / (time.perf_counter() - start)


def main(argv):
    if len(argv) < 4:
        sys.exit(__doc__)
    procs, runs, dirs = int(argv[1]), int(argv[2]), argv[3:]
    lists = [files_of(d) for d in dirs]
    for d, paths in zip(dirs, lists):
        if not paths:
            sys.exit(f"pyread.py: no files under {d}")
    with multiprocessing.Pool(procs) as pool:
        for paths in lists:
            epoch(pool, procs, paths, 0)
        rates = [[] for _ in dirs]
        for run in range(1, runs + 1):
            for i, paths in enumerate(lists):
                rates[i].append(epoch(pool, procs, paths, run))
    for r in rates:
        print(round(statistics.median(r), 1), *(round(x, 1) for x in r))


if __name__ == "__main__":
    main(sys.argv)
