"""Unmodified PyTorch training input, timed on each DIR: torchvision ImageFolder with the standard
ImageNet training transform, read through DataLoader(shuffle=True, num_workers=WORKERS), caches
dropped before each pass. Run by compare.sh (as root, for drop_caches) with /usr/bin/python3.

usage: dataloader.py SAMPLES WORKERS RUNS DIR...

Each run reads the first SAMPLES samples of one shuffled order (the same order on every DIR: the
shuffle is seeded with the run number) from each DIR in turn, and prints one line per DIR: the
median samples/s over the runs and then each run's, decode and transform included. Each pass
drops the caches, then builds the ImageFolder untimed, as a job lists its dataset before its
first epoch; the timing starts with the DataLoader's iterator, so forking its workers is inside
it, as in every epoch.
"""

import statistics
import sys
import time

import torch
from torch.utils.data import DataLoader
from torchvision import datasets, transforms

BATCH = 32

TRAIN = transforms.Compose([
    transforms.RandomResizedCrop(224),
    transforms.RandomHorizontalFlip(),
    transforms.ToTensor(),
    transforms.Normalize(mean=[0.485, 0.456, 0.406], std=[0.229, 0.224, 0.225]),
])


def drop_caches():
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("3\n")


def timed_epoch(ds, samples, workers, seed):
    """Reads the first `samples` samples (at least: whole batches) of one shuffled order of `ds`
    (seeded with `seed`) through DataLoader(shuffle=True, num_workers=workers); returns the
    samples read and the seconds it took, from the DataLoader's iterator on (forking its workers
    included). direct.py times its epochs with it too."""
    loader = DataLoader(ds, batch_size=BATCH, shuffle=True, num_workers=workers,
                        generator=torch.Generator().manual_seed(seed))
    n = 0
    start = time.perf_counter()
    for images, _ in loader:
        n += len(images)
        if n >= samples:
            break
    return n, time.perf_counter() - start


def samples_per_second(root, samples, workers, seed):
    drop_caches()
    n, secs = timed_epoch(datasets.ImageFolder(root, transform=TRAIN), samples, workers, seed)
    return n / secs


def main(argv):
    if len(argv) < 5:
        sys.exit(__doc__)
    samples, workers, runs = int(argv[1]), int(argv[2]), int(argv[3])
    dirs = argv[4:]
    rates = {d: [] for d in dirs}
    for run in range(runs):
        for d in dirs:
            rates[d].append(samples_per_second(d, samples, workers, seed=run))
    for d in dirs:
        print(round(statistics.median(rates[d]), 1), *(round(r, 1) for r in rates[d]))


if __name__ == "__main__":
    main(sys.argv)
