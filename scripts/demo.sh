#!/usr/bin/env bash
# Builds aifs and runs its main job on a generated demo dataset: a small ImageFolder tree of real
# JPEGs (10 classes, 2,000 images) is packed into a shard set, verified, and listed. Everything
# lives under one temporary directory, removed at the end unless KEEP=1.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/setup.sh
build_aifs

work=$(mktemp -d /tmp/aifs-demo.XXXXXX)
[ "${KEEP:-0}" = 1 ] || trap 'rm -rf "$work"' EXIT

echo "== generating an ImageFolder tree of JPEGs in $work/train"
go run ./integration/gendata --jpeg --files "${FILES:-2000}" --classes 10 "$work/train"

echo "== aifs pack $work/train $work/set"
bin/aifs pack --shard-size 64MiB "$work/train" "$work/set"
ls -l "$work/set"

echo "== aifs verify $work/set"
bin/aifs verify "$work/set"

echo "== aifs ls $work/set   (the classes)"
bin/aifs ls "$work/set"
first=$(bin/aifs ls "$work/set" | head -1 | awk '{print $NF}')
echo "== aifs ls $work/set $first   (first 5 images)"
bin/aifs ls "$work/set" "$first" | head -5

[ "${KEEP:-0}" = 1 ] && echo "kept $work"
echo "demo done"
