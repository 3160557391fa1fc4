#!/usr/bin/python3
"""One rank of a simulated training cluster; run by integration/cluster_test.go and
integration/bench/multinode.sh, one process per rank, each with RANK, WORLD_SIZE, LOCAL_RANK,
LOCAL_WORLD_SIZE, MASTER_ADDR and MASTER_PORT set as torchrun sets them.

  cluster.py --root DIR --out FILE [--sampler aifs|torch] [--epochs E] [--batch B]
             [--workers W] [--seed S] [--rotate-every K] [--stats MOUNT] [--drop-caches]

Joins a gloo process group, builds a torchvision ImageFolder over DIR whose loader reads each
file's bytes and returns (path relative to DIR, length, CRC-32), and reads E epochs through a
DataLoader with the sampler named: `aifs` is python/aifs_plan.DistributedSampler, `torch` is
torch.utils.data.DistributedSampler wrapped by aifs_plan.plan (plans either way). After each
epoch every rank waits for the others; then local rank 0 copies MOUNT/.aifs/stats (the node's
mount) into its record, and with --drop-caches rank 0 then drops the kernel's caches (root
only), so that the next epoch reads from the disk caches, not from memory. Writes FILE, JSON:
{"rank", "node", "epochs": [{"seconds", "samples": [[path, length, crc32, shard], ...],
"targets": [...], "stats"}]}, samples in the order read; shard is the shard number from the
mount's .aifs/locations, -1 off an aifs mount.

Uses only the standard library, torch and torchvision (Debian's python3-torch and
python3-torchvision under /usr/bin/python3).
"""

import argparse
import json
import os
import sys
import time
import zlib

import torch.distributed as dist
from torch.utils.data import DataLoader, DistributedSampler
from torchvision import datasets

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
from aifs import plan as aifs_plan  # noqa: E402


class ReadSample:
    """An ImageFolder loader that reads a file and returns (path relative to root, length,
    CRC-32 of its bytes)."""

    def __init__(self, root):
        self.root = root

    def __call__(self, path):
        with open(path, "rb") as f:
            data = f.read()
        return os.path.relpath(path, self.root), len(data), zlib.crc32(data)


def as_list(batch):
    return batch


def shards(ds):
    """Returns the shard number of each sample of ImageFolder `ds` (by path relative to its
    root) on an aifs mount; {} elsewhere."""
    places = aifs_plan.sample_places(ds) or []
    return {os.path.relpath(path, ds.root): place[0] for (path, _), place in zip(ds.samples, places)}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--root", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--sampler", choices=("aifs", "torch"), default="aifs")
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--workers", type=int, default=1)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--rotate-every", type=int, default=0)
    p.add_argument("--stats", help="the node's mount point, whose .aifs/stats local rank 0 records")
    p.add_argument("--drop-caches", action="store_true", help="drop the kernel's caches between epochs")
    a = p.parse_args()

    dist.init_process_group("gloo")
    rank, local_rank = dist.get_rank(), int(os.environ["LOCAL_RANK"])
    ds = datasets.ImageFolder(a.root, loader=ReadSample(a.root))
    if a.sampler == "aifs":
        sampler = aifs_plan.DistributedSampler(ds, shuffle=True, seed=a.seed, rotate_every=a.rotate_every)
        node = sampler.node
    else:
        sampler = DistributedSampler(ds, shuffle=True, seed=a.seed)
        node = rank // int(os.environ["LOCAL_WORLD_SIZE"])
    shard_of = shards(ds)
    loader = DataLoader(ds, batch_size=a.batch, sampler=sampler, num_workers=a.workers, collate_fn=as_list)
    if a.sampler == "torch":
        aifs_plan.plan(loader)

    epochs = []
    for epoch in range(a.epochs):
        sampler.set_epoch(epoch)
        start = time.monotonic()
        samples, targets = [], []
        for batch in loader:
            for sample, target in batch:
                samples.append(list(sample) + [shard_of.get(sample[0], -1)])
                targets.append(target)
        record = {"seconds": time.monotonic() - start, "samples": samples, "targets": targets}
        dist.barrier()  # the node's epoch is over when all its ranks are
        if a.stats and local_rank == 0:
            with open(os.path.join(a.stats, ".aifs", "stats")) as f:
                record["stats"] = json.load(f)
        dist.barrier()
        if a.drop_caches and rank == 0:
            os.sync()
            with open("/proc/sys/vm/drop_caches", "w") as f:
                f.write("3\n")
        dist.barrier()
        epochs.append(record)
    with open(a.out, "w") as f:
        json.dump({"rank": rank, "node": node, "epochs": epochs}, f)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
