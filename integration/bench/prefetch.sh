#!/usr/bin/env bash
# prefetch.sh — the figures of the prefetch issue, side by side in one run on one disk (an ext4
# image on a direct-I/O loop device holding both the plain tree and its shard set):
#   1. next-epoch hit rate of aifs's memory cache for a cache of c = 1/4, 1/2 and all of the
#      dataset (kernel_cache=off, so that aifs's cache is the only one), against the c²/2 that
#      LRU gets under a fresh shuffle;
#   2. cold shuffled epochs with 1 and 8 readers: aifs with a plan (aifs bench --plan writes each
#      epoch's order to .aifs/plan, as python/aifs_plan.py does), aifs without (a second mount
#      with -o plans=off takes no plan), native ext4; with every cache dropped before each epoch, and
#      with the tree listed again after dropping them (--relist: a training job lists its
#      dataset before its first epoch, and only then can read-ahead go into the page cache);
#      and the device's ceiling for read-ahead (fio, 16 random reads in flight);
#   3. a sorted scan (validation order) with 1 reader: aifs, ext4, and fio's sequential O_DIRECT
#      read of the shard (the device's sequential bandwidth, as compare.sh measures it: lib.sh's
#      fio_once);
#   4. memory-constrained epochs: readers and the aifs daemon in memory cgroups limited to half
#      the dataset (aifs with kernel_cache=on, and with kernel_cache=off and mem_cache at 3/4
#      of the limit), against native ext4 read in a cgroup of the same limit.
# Prints markdown tables; commits nothing. Needs root.
#
# Environment (defaults in brackets): FILES [10000]  EPOCHS [3]  WORKDIR [/var/tmp]
set -euo pipefail

FILES=${FILES:-10000}
EPOCHS=${EPOCHS:-3}
WORKDIR=${WORKDIR:-/var/tmp}
NAME=prefetch
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

echo "== machine: $(machine)" >&2
ext4_dataset "$FILES" "$RUN/ext4"
data=$(du -sb "$RUN/ext4/set" | awk '{print $1}')
stat_of() { "$AIFS" stats --json "$1" | $PY -c 'import json,sys; d=json.load(sys.stdin); print(d["cache"]["hits"], d["cache"]["misses"])'; }

# --- 1. next-epoch hit rate -------------------------------------------------------------------
echo "| cache (fraction c of the dataset) | next-epoch hit rate | 0.9·c (target) | LRU expectation c²/2 |"
echo "|---|---|---|---|"
for c in 0.25 0.5 1.0; do
	mnt=$RUN/mnt-c$c
	mkdir "$mnt"
	"$AIFS" mount -o kernel_cache=off,mem_cache="$(awk -v c="$c" -v d="$data" 'BEGIN{printf "%d", c*d}')" "$RUN/ext4/set" "$mnt"
	"$AIFS" bench --seed 1 -j 8 "$mnt" >/dev/null
	read -r h0 m0 < <(stat_of "$mnt")
	"$AIFS" bench --seed 2 -j 8 "$mnt" >/dev/null
	read -r h1 m1 < <(stat_of "$mnt")
	echo "| $c | $(awk -v h=$((h1 - h0)) -v m=$((m1 - m0)) 'BEGIN{printf "%.3f", h/(h+m)}') | $(awk -v c="$c" 'BEGIN{printf "%.3f", 0.9*c}') | $(awk -v c="$c" 'BEGIN{printf "%.3f", c*c/2}') |"
	fusermount3 -u "$mnt"
done

# --- 2. shuffled epochs with and without a plan -------------------------------------------------
label() { if [[ -n $1 ]]; then echo "tree listed after dropping caches"; else echo "everything cold"; fi; }
mkdir "$RUN/plan" "$RUN/noplan"
"$AIFS" mount "$RUN/ext4/set" "$RUN/plan"
"$AIFS" mount -o plans=off "$RUN/ext4/set" "$RUN/noplan"
echo
# The device's ceiling for read-ahead: fio's O_DIRECT random reads of the mean sample size with
# 16 in flight (the Loader's 16 workers), right after each row's epochs. Read-ahead cannot read
# faster than that, so ceiling/no plan is the most a plan can gain over the same readers
# without one (at 1 reader: the device's parallel rate over one reader's latency-bound rate).
mean=$(fio_block "$data" "$FILES")
echo "| cold shuffled epoch | readers | aifs with a plan files/s | aifs without files/s | native ext4 files/s | device ceiling files/s | plan/no plan | plan/ext4 | plan/ceiling | ceiling/no plan |"
echo "|---|---|---|---|---|---|---|---|---|---|"
for relist in "" --relist; do
	for j in 1 8; do
		"$AIFS" bench --json --plan --drop-caches $relist --epochs "$EPOCHS" -j "$j" "$RUN/plan" "$RUN/noplan" "$RUN/ext4/tree" >"$RUN/bench.json"
		read -r p n e < <(bench_medians "$RUN/bench.json")
		c=$(fio_run "$RUN/ext4/set/shard-000000.dat" randread "$mean" 1 --iodepth=16 --time_based --runtime=3)
		echo "| $(label "$relist") | $j | $p | $n | $e | $c | $(ratio "$p" "$n") | $(ratio "$p" "$e") | $(ratio "$p" "$c") | $(ratio "$c" "$n") |"
	done
done

# --- 3. sorted scan against the device's sequential bandwidth ---------------------------------
f=$(fio_once read 4M 1)
echo
echo "| sorted scan, 1 reader | aifs MB/s | native ext4 MB/s | fio sequential O_DIRECT 4 MiB reads, 8 in flight, MB/s | aifs/fio (target ≥ 0.8) | aifs/ext4 |"
echo "|---|---|---|---|---|---|"
for relist in "" --relist; do
	"$AIFS" bench --json --seq --drop-caches $relist --epochs "$EPOCHS" -j 1 "$RUN/noplan" "$RUN/ext4/tree" >"$RUN/bench.json"
	read -r a e < <($PY -c 'import json,sys,statistics as s; r=json.load(open(sys.argv[1])); print(*[round(s.median(p["mb_per_s"] for p in r["passes"] if p["dir"]==d["dir"])) for d in r["dirs"]])' "$RUN/bench.json")
	echo "| $(label "$relist") | $a | $e | $f | $(ratio "$a" "$f") | $(ratio "$a" "$e") |"
done
fusermount3 -u "$RUN/plan"
fusermount3 -u "$RUN/noplan"

# --- 4. memory-constrained epochs ---------------------------------------------------------------
# Each system's readers run in a memory cgroup of half the dataset; each aifs daemon in one of its
# own, of the same limit: kernel_cache=on (the default: the page cache keeps what was read; aifs
# holds read-ahead only, mem_cache=64M) and kernel_cache=off (aifs keeps a stable subset,
# mem_cache at 3/4 of the limit).
limit=$((data / 2))
mkdir "$RUN/limited-on" "$RUN/limited-off"
in_cgroup "$limit" "$AIFS" mount -o mem_cache=64M "$RUN/ext4/set" "$RUN/limited-on"
in_cgroup "$limit" "$AIFS" mount -o kernel_cache=off,mem_cache=$((limit * 3 / 4)) "$RUN/ext4/set" "$RUN/limited-off"
for d in limited-on limited-off ext4/tree; do
	dropcaches
	in_cgroup "$limit" "$AIFS" bench --json --epochs "$EPOCHS" -j 8 "$RUN/$d" >"$RUN/$(basename "$d").json"
done
later() { $PY -c 'import json,sys,statistics as s; print(round(s.median(p["files_per_s"] for p in json.load(open(sys.argv[1]))["passes"] if p["epoch"] > 1)))' "$1"; }
first() { $PY -c 'import json,sys; print(round(json.load(open(sys.argv[1]))["passes"][0]["files_per_s"]))' "$1"; }
echo
echo "| memory limited to half the dataset, 8 readers | aifs kernel_cache=on files/s | aifs kernel_cache=off files/s | native ext4 files/s | on/ext4 | off/ext4 |"
echo "|---|---|---|---|---|---|"
for f in first later; do
	on=$($f "$RUN/limited-on.json") off=$($f "$RUN/limited-off.json") e=$($f "$RUN/tree.json")
	echo "| $([[ $f == first ]] && echo "first epoch (cold)" || echo "later epochs (median)") | $on | $off | $e | $(ratio "$on" "$e") | $(ratio "$off" "$e") |"
done
