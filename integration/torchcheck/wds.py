#!/usr/bin/python3
"""Writes an ImageFolder tree (ROOT/CLASS/FILE) as WebDataset tar shards, as webdataset's
TarWriter does: each sample is two consecutive members, KEY.EXT (the image's bytes, EXT its
extension as written) and KEY.cls (the class number, in sorted class order, as text), with
mode 0o444; KEY is the file's name less its extension, so it must be unique across classes.
Also writes OUT/classes.txt, line i naming class i, for aifs index --class-names.

Usage: wds.py ROOT OUT [--per-tar N] [--shuffle SEED] [--format pax|gnu|ustar] [--prefix NAME]

Shards are OUT/PREFIX-000000.tar, ... of N samples each (default 1000), in sorted order or
shuffled with SEED (as datasets are usually written). Standard library only.
"""
import argparse
import io
import os
import random
import sys
import tarfile

FORMATS = {"pax": tarfile.PAX_FORMAT, "gnu": tarfile.GNU_FORMAT, "ustar": tarfile.USTAR_FORMAT}


def samples(root):
    classes = sorted(d for d in os.listdir(root) if os.path.isdir(os.path.join(root, d)))
    out = []
    for i, c in enumerate(classes):
        for dirpath, _, files in sorted(os.walk(os.path.join(root, c))):
            for f in sorted(files):
                out.append((os.path.join(dirpath, f), i))
    return classes, out


def add(tar, name, data, mtime):
    info = tarfile.TarInfo(name)
    info.size, info.mode, info.mtime = len(data), 0o444, mtime
    info.uname = info.gname = "bigdata"
    tar.addfile(info, io.BytesIO(data))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("root")
    ap.add_argument("out")
    ap.add_argument("--per-tar", type=int, default=1000)
    ap.add_argument("--shuffle", type=int, default=None)
    ap.add_argument("--format", choices=sorted(FORMATS), default="pax")
    ap.add_argument("--prefix", default="train")
    args = ap.parse_args()
    classes, items = samples(args.root)
    keys = set()
    for path, _ in items:
        key = os.path.basename(path).split(".", 1)[0]
        if key in keys:
            sys.exit("wds.py: two files have the key %r" % key)
        keys.add(key)
    if args.shuffle is not None:
        random.Random(args.shuffle).shuffle(items)
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "classes.txt"), "w") as f:
        f.write("".join(c + "\n" for c in classes))
    for n in range(0, len(items), args.per_tar):
        path = os.path.join(args.out, "%s-%06d.tar" % (args.prefix, n // args.per_tar))
        with tarfile.open(path, "w", format=FORMATS[args.format]) as tar:
            for src, label in items[n:n + args.per_tar]:
                base = os.path.basename(src)
                key, ext = base.split(".", 1)
                with open(src, "rb") as f:
                    data = f.read()
                mtime = int(os.stat(src).st_mtime)
                add(tar, key + "." + ext, data, mtime)
                add(tar, key + ".cls", str(label).encode(), mtime)


if __name__ == "__main__":
    main()
