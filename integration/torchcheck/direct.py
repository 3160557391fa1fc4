#!/usr/bin/python3
"""Checks python/aifs_direct.py against a live aifs mount; run by integration/direct_test.go.
Each subcommand prints one line of JSON on success and exits 1 with a reason on stderr.

  read MNT              every file under MNT read with aifs_direct (CRC32C checked) equals its
                        bytes read through the mount; prints how many were read directly and
                        the FUSE READs the direct pass sent (from MNT/.aifs/stats).
  imagefolder MNT       ImageFolder(MNT) with use_direct gives the same samples and, decoded,
                        the same tensors and labels as ImageFolder(MNT).
  corrupt MNT PATH      reading PATH with check=True fails with EIO naming a corrupt sample,
                        and without check returns the (corrupt) bytes.
  remount MNT PATH      reads PATH, prints "ready", waits for a line on stdin (the test remounts
                        MNT with another set meanwhile), reads PATH again: the remount is found
                        and the new bytes are read.
"""

import errno
import hashlib
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
from aifs import direct as aifs_direct  # noqa: E402


def fail(msg):
    print("direct.py: " + msg, file=sys.stderr)
    sys.exit(1)


def fuse_reads(mnt):
    with open(os.path.join(mnt, ".aifs", "stats")) as f:
        return json.load(f)["ops"]["read"]["count"]


def files_under(root):
    out = []
    for d, dirs, files in os.walk(root):
        dirs.sort()
        out += [os.path.join(d, f) for f in sorted(files)]
    return out


def cmd_read(mnt):
    m = aifs_direct.open(mnt)
    paths = files_under(mnt)
    start = fuse_reads(mnt)
    before = fuse_reads(mnt)
    overhead = before - start  # the READs of reading the stats file itself
    direct = {}
    for p in paths:
        direct[p] = m.read(p, check=True)
    reads = fuse_reads(mnt) - before - overhead
    located = sum(m.locate(p) is not None for p in paths)
    for p in paths:
        with open(p, "rb") as f:
            if f.read() != direct[p]:
                fail(f"{p}: aifs_direct.read differs from the mount's bytes")
    print(json.dumps({"files": len(paths), "located": located, "fuse_reads_direct_pass": reads,
                      "bytes": sum(len(b) for b in direct.values())}))


def cmd_imagefolder(mnt):
    import torch
    from torchvision import datasets, transforms

    t = transforms.Compose([transforms.Resize(32), transforms.CenterCrop(32), transforms.ToTensor()])
    plain = datasets.ImageFolder(mnt, transform=t)
    direct = aifs_direct.use_direct(datasets.ImageFolder(mnt, transform=t))
    if not isinstance(direct.loader, aifs_direct._PILLoader):
        fail("use_direct did not swap the loader")
    if plain.samples != direct.samples or plain.classes != direct.classes:
        fail("ImageFolder with the direct loader lists other samples")
    for i in range(len(plain)):
        (a, la), (b, lb) = plain[i], direct[i]
        if la != lb or not torch.equal(a, b):
            fail(f"sample {i} ({plain.samples[i][0]}): tensors or labels differ")
    print(json.dumps({"samples": len(plain)}))


def cmd_corrupt(mnt, path):
    m = aifs_direct.open(mnt)
    try:
        m.read(path, check=True)
    except OSError as e:
        if e.errno != errno.EIO or "corrupt" not in str(e):
            fail(f"check=True raised {e!r}, want EIO naming a corrupt sample")
        print(json.dumps({"error": str(e), "unchecked_sha256": hashlib.sha256(m.read(path)).hexdigest()}))
        return
    fail("check=True read a corrupt sample without an error")


def cmd_remount(mnt, path):
    m = aifs_direct.open(mnt)
    first, identity = m.read(path), m.locations.identity
    print("ready", flush=True)
    sys.stdin.readline()
    second = m.read(path, check=True)
    with open(path, "rb") as f:
        through = f.read()
    print(json.dumps({"stale": m.stale, "identity_changed": m.locations.identity != identity,
                      "first_sha256": hashlib.sha256(first).hexdigest(),
                      "second_sha256": hashlib.sha256(second).hexdigest(), "same_as_mount": second == through}))


def main(argv):
    cmds = {"read": (cmd_read, 1), "imagefolder": (cmd_imagefolder, 1), "corrupt": (cmd_corrupt, 2),
            "remount": (cmd_remount, 2)}
    if len(argv) < 2 or argv[1] not in cmds or len(argv) - 2 != cmds[argv[1]][1]:
        fail("usage: direct.py read MNT | imagefolder MNT | corrupt MNT PATH | remount MNT PATH")
    cmds[argv[1]][0](*argv[2:])


if __name__ == "__main__":
    main(sys.argv)
