#!/usr/bin/env bash
# mount_vs_ext4.sh — the figures of the mount issue, side by side in one run on one disk:
#   1. shuffled whole-file reads of FILES ImageNet-like files (log-normal, mean 110 KiB) with
#      caches dropped, at each reader count in JOBS: the files on native ext4, the same files
#      packed into a shard set on the same ext4 and read through `aifs mount`, and fio O_DIRECT
#      random reads of the mean sample size from the shard file (the device ceiling);
#   2. daemon CPU time per sample (utime+stime from /proc over a cold shuffled epoch at 8
#      readers) of aifs and of go-fuse's loopback example over the ext4 tree, the reference of
#      the target, as a user (it serves the reads) and as root (FUSE passthrough); of aifs over
#      a tmpfs copy of the set (no disk read), and fio's CPU per pread of the same reads;
#   3. kernel_cache=on against kernel_cache=off at 8 readers: cold, warm, and with the readers in
#      a memory cgroup limited to half the dataset (the page cache cannot hold it);
#   4. ImageFolder construction over NAMES tiny files in 1,000 classes (warm, after one untimed
#      scan), native ext4 against the mount, and the daemon's RSS after the scan.
# ext4 lives on a loop-mounted image file in WORKDIR, so both systems share the same disk; the
# loop device reads its backing file with O_DIRECT, so the image is not cached a second time.
# Prints markdown tables; commits nothing. Needs root (loop devices, mounts, drop_caches); opens
# /dev/fuse to users for the run (the loopback example as a user), restoring its mode on exit.
#
# Environment (defaults in brackets):
#   FILES [10000]   JOBS ["1 8 32"]   EPOCHS [3] (median of the cold epochs)
#   NAMES [1280000] (0 skips part 4)  WORKDIR [/var/tmp]
set -euo pipefail

FILES=${FILES:-10000}
JOBS=${JOBS:-1 8 32}
EPOCHS=${EPOCHS:-3}
NAMES=${NAMES:-1280000}
WORKDIR=${WORKDIR:-/var/tmp}
NAME=mount_vs_ext4
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

echo "== machine: $(machine)" >&2

# --- 1. shuffled reads -----------------------------------------------------------------------
ext4_dataset "$FILES" "$RUN/ext4"
mkdir "$RUN/mnt"
"$AIFS" mount "$RUN/ext4/set" "$RUN/mnt"
pid=$(daemon_pid "$RUN/ext4/set")
mean=$(fio_block "$(du -sb "$RUN/ext4/set" | cut -f1)" "$FILES")

echo "| readers | native ext4 files/s | aifs files/s | aifs/ext4 | fio O_DIRECT random ${mean}-byte reads/s | aifs/fio |"
echo "|---|---|---|---|---|---|"
for j in $JOBS; do
	"$AIFS" bench --json --drop-caches --epochs "$EPOCHS" -j "$j" "$RUN/ext4/tree" "$RUN/mnt" >"$RUN/bench.json"
	read -r ext aifs < <(bench_medians "$RUN/bench.json")
	fio_iops=$(fio_run "$RUN/ext4/set/shard-000000.dat" randread "$mean" "$j" --iodepth=1 --time_based --runtime=10)
	echo "| $j | $ext | $aifs | $(ratio "$aifs" "$ext") | $fio_iops | $(ratio "$aifs" "$fio_iops") |"
done

# --- 2. daemon CPU per sample, against go-fuse's loopback example --------------------------------
# The target (40 µs a sample) was set where go-fuse's loopback example spent ~110 µs, so the
# example runs here too, over the ext4 tree, at the go-fuse version aifs builds with. Run by root
# it hands each open file to the kernel (FUSE passthrough, Linux 6.9+): the kernel reads the
# file and the daemon never sees the data, only the opens and closes. Run as a user it serves
# every READ itself, as aifs does and as the target's figure was taken; both are measured. One
# round is a cold epoch of each (caches dropped by root, then 'aifs bench --relist' by the
# mount's user, so that the tree is listed as a job lists it); EPOCHS rounds, interleaved.
# Two more rows split aifs's figure into its parts: aifs over a copy of the shard set in tmpfs
# (refused O_DIRECT, it reads the page cache: no disk read, only the FUSE round trip and a
# memory copy), and fio's CPU per pread of the same O_DIRECT reads (the disk read alone).
mkdir "$RUN/shm" "$RUN/mnt-shm"
mount -t tmpfs -o size=$(($(du -sb "$RUN/ext4/set" | cut -f1) * 11 / 10)) aifs-bench "$RUN/shm"
cp -r "$RUN/ext4/set" "$RUN/shm/set"
"$AIFS" mount "$RUN/shm/set" "$RUN/mnt-shm"
shm_pid=$(daemon_pid "$RUN/shm/set")
go build -o "$RUN/loopback" github.com/hanwen/go-fuse/v2/example/loopback
fuse_for_users
mkdir "$RUN/lb-root" "$RUN/lb-user"
chown nobody "$RUN/lb-user"
"$RUN/loopback" -q -ro "$RUN/lb-root" "$RUN/ext4/tree" &
lb_root=$!
as_nobody "$RUN/loopback" -q -ro "$RUN/lb-user" "$RUN/ext4/tree" &
for _ in $(seq 100); do
	[[ $(grep -c " $RUN/lb-" /proc/mounts) -eq 2 ]] && break
	sleep 0.1
done
[[ $(grep -c " $RUN/lb-" /proc/mounts) -eq 2 ]] || die "go-fuse's loopback example did not mount"
lb_user=$(pgrep -u nobody -f -- "^$RUN/loopback ") # $! is the subshell that runs as_nobody
hz=$(getconf CLK_TCK)
# cpu_us_per_sample PID CMD... runs CMD (one epoch over FILES files) after dropping the caches
# and prints the CPU time of process PID per file, in µs.
cpu_us_per_sample() {
	local pid=$1 t0 t1
	shift
	dropcaches
	t0=$(cpu_ticks "$pid")
	"$@" >/dev/null
	t1=$(cpu_ticks "$pid")
	awk -v t=$((t1 - t0)) -v hz="$hz" -v n="$FILES" 'BEGIN{printf "%.0f\n", t/hz*1e6/n}'
}
for _ in $(seq "$EPOCHS"); do
	cpu_us_per_sample "$pid" "$AIFS" bench --relist -j 8 "$RUN/mnt" >>"$RUN/cpu-aifs"
	cpu_us_per_sample "$lb_user" as_nobody "$AIFS" bench --relist -j 8 "$RUN/lb-user" >>"$RUN/cpu-lb-user"
	cpu_us_per_sample "$lb_root" "$AIFS" bench --relist -j 8 "$RUN/lb-root" >>"$RUN/cpu-lb-root"
	cpu_us_per_sample "$shm_pid" "$AIFS" bench --relist -j 8 "$RUN/mnt-shm" >>"$RUN/cpu-shm"
	fio_cpu_per_read "$RUN/ext4/set/shard-000000.dat" "$mean" 8 >>"$RUN/cpu-fio"
done
a=$(median <"$RUN/cpu-aifs")
u=$(median <"$RUN/cpu-lb-user")
r=$(median <"$RUN/cpu-lb-root")
m=$(median <"$RUN/cpu-shm")
f=$(median <"$RUN/cpu-fio")
echo
echo "Daemon CPU per sample (utime+stime), cold shuffled epoch, 8 readers, mean $mean bytes, median of $EPOCHS rounds:"
echo
echo "| daemon | µs a sample | rounds | aifs / it |"
echo "|---|---|---|---|"
echo "| aifs | **$a** | $(paste -sd' ' "$RUN/cpu-aifs") | |"
echo "| go-fuse loopback example, as a user (serves the READs; the target's reference, ~110 µs there, so target ratio 40/110 = 0.36) | $u | $(paste -sd' ' "$RUN/cpu-lb-user") | **$(ratio "$a" "$u")** |"
echo "| go-fuse loopback example, as root (FUSE passthrough: the kernel reads the files) | $r | $(paste -sd' ' "$RUN/cpu-lb-root") | $(ratio "$a" "$r") |"
echo "| aifs over a tmpfs copy of the set (no disk read: the FUSE round trip and a memory copy) | $m | $(paste -sd' ' "$RUN/cpu-shm") | $(ratio "$a" "$m") |"
echo "| fio, the same reads (pread, O_DIRECT, 8 jobs): CPU a read (the disk read alone) | $f | $(paste -sd' ' "$RUN/cpu-fio") | |"
fusermount3 -u "$RUN/mnt-shm"
umount "$RUN/shm"
fusermount3 -u "$RUN/lb-root"
fusermount3 -u "$RUN/lb-user"
wait || true

# --- 3. kernel_cache=on against off ----------------------------------------------------------------
mkdir "$RUN/mnt-off"
# aifs's own cache is kept small, so that the rows compare the kernel's page cache policy alone
# (drop_caches does not empty aifs's cache; docs/prefetch.md compares the cache policies).
"$AIFS" mount -o kernel_cache=off,mem_cache=64M "$RUN/ext4/set" "$RUN/mnt-off"
echo
echo "| 8 readers | kernel_cache=on files/s | kernel_cache=off files/s | on/off |"
echo "|---|---|---|---|"
"$AIFS" bench --json --drop-caches --epochs "$EPOCHS" "$RUN/mnt" "$RUN/mnt-off" >"$RUN/bench.json"
read -r on off < <(bench_medians "$RUN/bench.json")
echo "| cold | $on | $off | $(ratio "$on" "$off") |"
"$AIFS" bench --json --epochs $((EPOCHS + 1)) "$RUN/mnt" "$RUN/mnt-off" >"$RUN/bench.json" # epoch 1 warms; the median of 4 is the mean of 2 warm epochs
read -r on off < <(bench_medians "$RUN/bench.json")
echo "| warm | $on | $off | $(ratio "$on" "$off") |"
half=$(($(du -sb "$RUN/ext4/set" | cut -f1) / 2))
dropcaches
in_cgroup "$half" "$AIFS" bench --json --epochs "$EPOCHS" "$RUN/mnt" "$RUN/mnt-off" >"$RUN/bench.json"
read -r on off < <(bench_medians "$RUN/bench.json")
echo "| memory limited to half the dataset, from cold | $on | $off | $(ratio "$on" "$off") |"
fusermount3 -u "$RUN/mnt-off"
fusermount3 -u "$RUN/mnt"

# --- 4. ImageFolder construction and RSS --------------------------------------------------------
[[ $NAMES -gt 0 ]] || exit 0
fs_image ext4 $((NAMES / 1000 + 2048)) "$RUN/names" -O inline_data -N $((NAMES + 10000))
mkdir "$RUN/names-mnt"
go run ./integration/gendata --files "$NAMES" --classes 1000 --mean-size 40 --sigma 0.3 "$RUN/names/tree" >&2
"$AIFS" pack --quiet "$RUN/names/tree" "$RUN/names/set"
"$AIFS" mount "$RUN/names/set" "$RUN/names-mnt"
npid=$(daemon_pid "$RUN/names/set")
# one untimed scan of each, then 3 rounds; one median per line
scans=$($PY integration/bench/imagefolder.py "$NAMES" 3 "$RUN/names/tree" "$RUN/names-mnt" | cut -d' ' -f1)
e=$(sed -n 1p <<<"$scans")
a=$(sed -n 2p <<<"$scans")
rss=$(awk '/VmRSS/ {print $2}' "/proc/$npid/status")
idx=$(stat -c %s "$RUN/names/set/index.aifs")
echo
echo "ImageFolder over $NAMES names, warm, median of 3: native ext4 $e s, aifs $a s ($(awk -v a="$a" -v e="$e" 'BEGIN{printf "%.2f", a/e}')x); daemon RSS after the scans $((rss / 1024)) MiB, index $((idx / 1048576)) MiB"
