#!/usr/bin/env bash
# direct.sh — the figures of the direct-read issue: python/aifs_direct.py reads a sample's bytes
# straight from its shard file (one os.pread, located by the mount's .aifs/locations), against
# reads through the aifs FUSE mount and from native ext4, side by side in one run on one disk. It
#   1. generates FILES real JPEGs (gendata --jpeg: log-normal sizes, mean ~110 KB) on an ext4 image
#      on a direct-I/O loop device, packs them into a shard set on the same file system and
#      mounts it with aifs; then checks that every file read directly is the tree's, byte for byte
#      (direct.py verify);
#   2. measures, each figure the median of RUNS passes, the systems taking turns pass by pass
#      (the first of them moving by one each pass): direct (aifs_direct.Mount.read of the mount's
#      paths), aifs (open().read() through the mount), ext4 (open().read() of the tree):
#      a. raw reads, cold, at each reader count in JOBS: caches dropped before each system's
#         pass, the tree listed (untimed), then one shuffled order (seeded with the pass) read
#         whole by that many reader processes, each its share (direct.py raw). After each pass
#         of the systems, fio's O_DIRECT random reads of the mean sample size, one in flight per
#         job, as many jobs as readers (lib.sh's fio_once): the device's bound;
#      b. ImageFolder + DataLoader, cold: WORKERS workers, dataloader.py's transform
#         (RandomResizedCrop(224), flip, ToTensor, Normalize), PT_SAMPLES samples a pass, direct
#         being aifs_direct.use_direct(ImageFolder(MOUNTPOINT)) (direct.py loader);
#      c. after one untimed raw pass of every system (the page cache then holds the tree, the
#         mount's files and the shard files), raw reads and the DataLoader again, warm;
#      and over every direct and aifs pass, the aifs daemon's CPU (utime + stime of
#      /proc/PID/stat) and the FUSE requests its stats file counted (READs, and all kinds); and
#      the daemon's CPU over 10 s with nothing read, before the passes and after them: the idle
#      baseline that a direct pass is held against (it polls /proc/meminfo and its cgroup's
#      memory.stat: 1.0-1.4 ticks a second, 1-1.4% of a core, on the development machine);
#   3. prints the report (markdown: files/s, samples/s, ratios as the median of the passes'
#      ratios, daemon µs a sample and requests, the issue's targets) and writes it to RESULTS.
# The aifs mount is the default one (kernel_cache=on: aifs keeps only read-ahead, so its cold
# passes are cold). Commits nothing. Needs root (loop devices, mounts, drop_caches).
#
# Environment (defaults in brackets):
#   FILES [10000]  RUNS [3]  JOBS ["1 8"]  PT_SAMPLES [2000]  WORKERS [2]  WORKDIR [/var/tmp]
#   RESULTS [$WORKDIR/aifs-direct-results.md]
set -euo pipefail

FILES=${FILES:-10000}
RUNS=${RUNS:-3}
JOBS=${JOBS:-1 8}
PT_SAMPLES=${PT_SAMPLES:-2000}
WORKERS=${WORKERS:-2}
WORKDIR=${WORKDIR:-/var/tmp}
RESULTS=$(realpath -m "${RESULTS:-$WORKDIR/aifs-direct-results.md}") # lib.sh changes to the checkout
NAME=direct
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
started=$SECONDS
DRIVER=integration/bench/direct.py
TSV=$RUN/results.tsv
meta() { printf 'meta\t%s\t%s\n' "$1" "$2" >>"$TSV"; }

echo "== machine: $(machine)" >&2
meta machine "$(machine)"
meta date "$(date -u +%F)"
meta commit "$(commit_desc "$RESULTS")"
for v in FILES RUNS JOBS PT_SAMPLES WORKERS; do meta "$v" "${!v}"; done

# --- 1. the dataset, its shard set and the mount ------------------------------------------------
echo "== generating $FILES JPEGs" >&2
ext4_dataset "$FILES" "$RUN/ext4" --jpeg
mkdir "$RUN/mnt"
"$AIFS" mount "$RUN/ext4/set" "$RUN/mnt"
PID=$(daemon_pid "$RUN/ext4/set")
[[ -n $PID ]] || die "no aifs daemon found for $RUN/ext4/set"
bytes=$(find "$RUN/ext4/tree" -type f -printf '%s\n' | awk '{n += $1} END {print n}') # the files' bytes
mean=$(fio_block "$bytes" "$FILES")
meta bytes "$bytes"
meta fio_block "$mean"
$PY "$DRIVER" verify "$RUN/mnt" "$RUN/ext4/tree"
echo "== dataset ready after $((SECONDS - started)) s" >&2

# idle_ticks records the daemon's CPU ticks over IDLE_S seconds with nothing read (meta idle-N):
# what it spends on its own (timers, polling its memory budget), the baseline of the direct rows.
IDLE_S=10
meta idle_seconds $IDLE_S
idle_ticks() {
	local t0
	t0=$(cpu_ticks "$PID")
	sleep $IDLE_S
	meta "idle-$1" $(($(cpu_ticks "$PID") - t0))
}
idle_ticks 1

# raw_pass CASE PASS JOBS cold|warm reads the set once on each system in turn (direct.py raw,
# shuffled with PASS, JOBS readers; cold: caches dropped first), the first system moving by one
# each pass, and records the passes as CASE.
SYSTEMS=(direct aifs ext4)
raw_pass() {
	local case=$1 p=$2 j=$3 state=$4 i s args out
	for i in 0 1 2; do
		s=${SYSTEMS[(i + p) % 3]}
		case $s in
		direct) args=(direct "$RUN/mnt" "$j" "$p" "$RUN/mnt" "$PID") ;;
		aifs) args=(open "$RUN/mnt" "$j" "$p" "$RUN/mnt" "$PID") ;;
		ext4) args=(open "$RUN/ext4/tree" "$j" "$p") ;;
		esac
		[[ $state == warm ]] || dropcaches
		out=$($PY "$DRIVER" raw "${args[@]}")
		echo "$case $s $p $out" >>"$TSV"
	done
}
# loader_passes cold|warm records RUNS passes of ImageFolder + DataLoader on each system
# (direct.py loader) as loader-STATE.
loader_passes() {
	$PY "$DRIVER" loader "$PT_SAMPLES" "$WORKERS" "$RUNS" "$1" "$RUN/mnt" "$PID" "$RUN/ext4/tree" |
		sed "s/^/loader-$1 /" >>"$TSV"
}

# --- 2a. raw reads, cold, and the device's bound -------------------------------------------------
for j in $JOBS; do
	for p in $(seq "$RUNS"); do
		raw_pass "raw-cold-$j" "$p" "$j" cold
		iops=$(fio_once randread "$mean" "$j")
		echo "raw-cold-$j fio $p $iops - - - - -" >>"$TSV"
	done
	echo "== cold raw reads with $j readers done after $((SECONDS - started)) s" >&2
done

# --- 2b. ImageFolder + DataLoader, cold ------------------------------------------------------------
loader_passes cold
echo "== cold DataLoader passes done after $((SECONDS - started)) s" >&2

# --- 2c. warm: one untimed pass of every system, then raw reads and the DataLoader --------------
raw_pass warmup 0 "$(printf '%s\n' $JOBS | sort -n | tail -1)" warm # as many readers as the most in JOBS
for j in $JOBS; do
	for p in $(seq "$RUNS"); do raw_pass "raw-warm-$j" "$p" "$j" warm; done
done
loader_passes warm
idle_ticks 2
echo "== warm passes done after $((SECONDS - started)) s" >&2
meta seconds $((SECONDS - started))

# --- 3. the report ---------------------------------------------------------------------------------
mkdir -p "$(dirname "$RESULTS")"
$PY "$DRIVER" report "$TSV" | tee "$RESULTS"
echo "== written to $RESULTS" >&2
