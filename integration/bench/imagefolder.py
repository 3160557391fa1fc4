"""ImageFolder construction time on each DIR: what a training job waits for before its first batch
over a tree of many small files. Run by the bench scripts with /usr/bin/python3.

usage: imagefolder.py [--cold] SAMPLES ROUNDS DIR...

Builds torchvision's ImageFolder(DIR) once on each DIR, untimed (it warms the names; --cold
leaves this out, for a first scan after a mount), and then ROUNDS times on each DIR in turn,
timed; prints one line per DIR: the median seconds and then each round's. Exits with an error if
an ImageFolder does not find SAMPLES samples. One process does every scan, so that importing
torchvision (a second or two) is paid once, and is never timed.
"""

import statistics
import sys
import time

from torchvision import datasets


def build(root, samples):
    """Seconds ImageFolder(root) took; the samples are file names only (nothing is opened)."""
    start = time.perf_counter()
    ds = datasets.ImageFolder(root, loader=lambda p: p)
    took = time.perf_counter() - start
    if len(ds) != samples:
        sys.exit(f"imagefolder.py: ImageFolder found {len(ds)} samples in {root}, not {samples}")
    return took


def main(argv):
    cold = len(argv) > 1 and argv[1] == "--cold"
    if cold:
        argv = argv[1:]
    if len(argv) < 4:
        sys.exit(__doc__)
    samples, rounds = int(argv[1]), int(argv[2])
    dirs = argv[3:]
    for d in dirs if not cold else ():
        build(d, samples)
    secs = {d: [] for d in dirs}
    for _ in range(rounds):
        for d in dirs:
            secs[d].append(build(d, samples))
    for d in dirs:
        print(round(statistics.median(secs[d]), 2), *(round(s, 2) for s in secs[d]))


if __name__ == "__main__":
    main(sys.argv)
