#!/usr/bin/python3
"""Checks an aifs mount with real torchvision; run by integration/torch_test.go.

Uses only the standard library, torch, torchvision and PIL (Debian's python3-torch,
python3-torchvision and python3-pil; run it with /usr/bin/python3). Each subcommand prints one
line of JSON on success and exits 1 with a one-line reason on stderr on any difference.

  imagefolder SRC MNT          ImageFolder on both roots: same classes, class_to_idx and samples
                               (path relative to the root, class index).
  loader SRC MNT [--workers W] [--limit N] [--plan]
                               a shuffled DataLoader (batch 16, W workers, default 2) over both
                               roots, decoding each image to a tensor: every index seen once, and
                               the same tensor digest and label per sample. With --plan the
                               mount's DataLoader is wrapped by python/aifs_plan.plan(), and the
                               output adds the mount's cache and plan statistics.
  requests MNT [--limit N]     decodes the first N files (sorted) with PIL and reports how many
                               FUSE requests that took, from MNT/.aifs/stats before and after.
"""

import argparse
import hashlib
import json
import os
import sys
import time

try:
    import torch
    from PIL import Image
    from torch.utils.data import DataLoader, Dataset, Subset
    from torchvision import datasets, transforms
except ImportError as e:
    print("check.py: %s needs torch, torchvision and PIL (Debian: python3-torch python3-torchvision "
          "python3-pil): %s" % (sys.executable, e), file=sys.stderr)
    sys.exit(1)


def fail(msg):
    print("check.py: " + msg, file=sys.stderr)
    sys.exit(1)


def relative_samples(ds, root):
    return [(os.path.relpath(p, root), c) for p, c in ds.samples]


def cmd_imagefolder(args):
    a = datasets.ImageFolder(args.src)
    b = datasets.ImageFolder(args.mnt)
    if a.classes != b.classes:
        fail("classes differ: source %r, mount %r" % (a.classes[:10], b.classes[:10]))
    if a.class_to_idx != b.class_to_idx:
        fail("class_to_idx differs")
    sa, sb = relative_samples(a, args.src), relative_samples(b, args.mnt)
    if len(sa) != len(sb):
        fail("source has %d samples, mount %d" % (len(sa), len(sb)))
    for i, (x, y) in enumerate(zip(sa, sb)):
        if x != y:
            fail("sample %d: source %r, mount %r" % (i, x, y))
    print(json.dumps({"classes": len(a.classes), "samples": len(sa)}))


class Digests(Dataset):
    """Yields (index, sha256 of the decoded tensor's bytes, label) for each sample of ds.

    It shows ds's samples and root, as ImageFolder does, so that aifs_plan can name the files."""

    def __init__(self, ds):
        self.ds = ds
        base = ds.dataset if isinstance(ds, Subset) else ds
        self.root = base.root
        self.samples = [base.samples[i] for i in ds.indices] if isinstance(ds, Subset) else base.samples

    def __len__(self):
        return len(self.ds)

    def __getitem__(self, i):
        x, label = self.ds[i]
        return i, hashlib.sha256(x.numpy().tobytes()).hexdigest(), label


def load_all(root, workers, limit, plan=False):
    # The default loader opens the file and converts it to RGB; ToTensor is deterministic.
    ds = datasets.ImageFolder(root, transform=transforms.ToTensor())
    if limit is not None:
        ds = Subset(ds, range(min(limit, len(ds))))
    n = len(ds)
    loader = DataLoader(Digests(ds), batch_size=16, shuffle=True, num_workers=workers)
    if plan:
        sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
        from aifs import plan as aifs_plan
        aifs_plan.plan(loader)
    seen = {}
    start = time.monotonic()
    for idx, digests, labels in loader:
        for i, h, c in zip(idx.tolist(), digests, labels.tolist()):
            if i in seen:
                fail("%s: index %d delivered twice" % (root, i))
            seen[i] = (h, c)
    secs = time.monotonic() - start
    if len(seen) != n:
        missing = sorted(set(range(n)) - seen.keys())
        fail("%s: %d of %d samples never delivered (first: %d)" % (root, len(missing), n, missing[0]))
    return ds, seen, secs


def sample_path(ds, i, root):
    base = ds.dataset if isinstance(ds, Subset) else ds
    return os.path.relpath(base.samples[i][0], root)


def cmd_loader(args):
    torch.manual_seed(0)
    dsa, a, secs_a = load_all(args.src, args.workers, args.limit)
    dsb, b, secs_b = load_all(args.mnt, args.workers, args.limit, plan=args.plan)
    if len(a) != len(b):
        fail("source has %d samples, mount %d" % (len(a), len(b)))
    for i in range(len(a)):
        if a[i] != b[i]:
            fail("sample %d (%s): source (digest %s, label %d), mount %s (digest %s, label %d)" % (
                i, sample_path(dsa, i, args.src), a[i][0][:16], a[i][1],
                sample_path(dsb, i, args.mnt), b[i][0][:16], b[i][1]))
    out = {
        "samples": len(a), "workers": args.workers,
        "source_seconds": round(secs_a, 3), "mount_seconds": round(secs_b, 3),
        "source_samples_per_s": round(len(a) / secs_a, 1), "mount_samples_per_s": round(len(b) / secs_b, 1),
    }
    if args.plan:
        st = read_stats(args.mnt)
        out.update(cache=st["cache"], plans=st["plans"], prefetch=st["prefetch"], page_cache=st.get("page_cache", {}))
    print(json.dumps(out))


def read_stats(mnt):
    """The stats file of the aifs mount at `mnt`, on either data plane (aifs_direct.control_root)."""
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
    from aifs import direct as aifs_direct

    with open(os.path.join(aifs_direct.control_root(mnt), ".aifs", "stats"), "rb") as f:
        return json.load(f)


def cmd_requests(args):
    files = []
    for dirpath, dirnames, filenames in os.walk(args.mnt):
        files.extend(os.path.join(dirpath, n) for n in filenames)
    files.sort()
    if args.limit is not None:
        files = files[:args.limit]
    before = read_stats(args.mnt)
    for p in files:
        with open(p, "rb") as f:
            Image.open(f).convert("RGB")
    after = read_stats(args.mnt)
    per_op = {}
    for op, st in after["ops"].items():
        d = st["count"] - before["ops"].get(op, {"count": 0})["count"]
        if d:
            per_op[op] = d
    print(json.dumps({"samples": len(files), "requests": after["requests"] - before["requests"],
                      "per_op": per_op, "kernel_cache": after.get("kernel_cache")}))


def main():
    p = argparse.ArgumentParser(description="Checks an aifs mount with torchvision.")
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("imagefolder")
    s.add_argument("src")
    s.add_argument("mnt")
    s = sub.add_parser("loader")
    s.add_argument("src")
    s.add_argument("mnt")
    s.add_argument("--workers", type=int, default=2)
    s.add_argument("--limit", type=int)
    s.add_argument("--plan", action="store_true")
    s = sub.add_parser("requests")
    s.add_argument("mnt")
    s.add_argument("--limit", type=int)
    args = p.parse_args()
    {"imagefolder": cmd_imagefolder, "loader": cmd_loader, "requests": cmd_requests}[args.cmd](args)


if __name__ == "__main__":
    main()
