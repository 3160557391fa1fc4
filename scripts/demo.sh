#!/usr/bin/env bash
# Builds aifs and runs its main job on a generated demo dataset: a small ImageFolder tree of real
# JPEGs (10 classes, 2,000 images) is packed into a shard set, verified, listed, mounted, and read
# through the mount by an unmodified PyTorch ImageFolder + DataLoader for two epochs (with the
# plan-sending sampler of the package aifs, python/aifs/plan.py), and the mount's statistics are printed. Everything lives under one temporary directory, unmounted and removed at the end
# unless KEEP=1. Mounting needs root (or user FUSE mounts through fusermount3).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/setup.sh
need_packages fuse3 python3-torch python3-torchvision python3-pil
build_aifs

work=$(mktemp -d /tmp/aifs-demo.XXXXXX)
cleanup() {
	mountpoint -q "$work/mnt" 2>/dev/null && fusermount3 -u "$work/mnt"
	[ "${KEEP:-0}" = 1 ] || rm -rf "$work"
}
trap cleanup EXIT

echo "== generating an ImageFolder tree of JPEGs in $work/train"
go run ./integration/gendata --jpeg --files "${FILES:-2000}" --classes 10 "$work/train"

echo "== aifs pack $work/train $work/set"
bin/aifs pack --shard-size 64MiB "$work/train" "$work/set"
ls -l "$work/set"

echo "== aifs verify $work/set"
bin/aifs verify "$work/set"

echo "== aifs ls $work/set   (the classes)"
bin/aifs ls "$work/set"
first=$(bin/aifs ls "$work/set" | awk 'NR == 1 {print $NF}')
echo "== aifs ls $work/set $first   (first 5 images)"
bin/aifs ls "$work/set" "$first" | sed -n 1,5p # sed reads to the end: no SIGPIPE under pipefail

echo "== aifs mount $work/set $work/mnt"
mkdir "$work/mnt"
bin/aifs mount "$work/set" "$work/mnt"
echo "== PyTorch ImageFolder + DataLoader(shuffle=True, num_workers=2) over the mount, two epochs,"
echo "   its sampler wrapped by aifs.plan.PlanSampler so that aifs reads each epoch ahead in its order"
PYTHONPATH=python /usr/bin/python3 - "$work/mnt" <<'PY'
import sys, time
import torch
from torchvision import datasets, transforms
import aifs.plan
ds = datasets.ImageFolder(sys.argv[1], transform=transforms.Compose(
    [transforms.Resize(64), transforms.CenterCrop(64), transforms.ToTensor()]))
print(f"ImageFolder: {len(ds)} samples, {len(ds.classes)} classes")
sampler = aifs.plan.PlanSampler(torch.utils.data.RandomSampler(ds), ds)
loader = torch.utils.data.DataLoader(ds, sampler=sampler, batch_size=32, num_workers=2)
for epoch in (1, 2):
    t = time.time()
    n = sum(len(y) for _, y in loader)
    print(f"epoch {epoch}: {n} samples decoded in {time.time() - t:.1f} s ({n / (time.time() - t):.0f} samples/s)")
PY
echo "== aifs stats $work/mnt"
bin/aifs stats "$work/mnt"
fusermount3 -u "$work/mnt"

[ "${KEEP:-0}" = 1 ] && echo "kept $work (unmounted)"
echo "demo done"
