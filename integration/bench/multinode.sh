#!/usr/bin/env bash
# multinode.sh — the figures of the multi-node issue (docs/multinode.md), side by side in one run:
# NODES simulated trainer nodes on this machine, each an aifs mount of one shard set in S3 with a
# disk cache of its own (-o prefetch_shards=on), each read by LOCAL ranks (processes with
# torchrun's variables in one gloo group: integration/torchcheck/cluster.py, ImageFolder and a
# DataLoader of WORKERS workers) for EPOCHS epochs. The S3 server is versitygw (posix backend) on
# 127.0.0.1 behind the s3delay proxy, which adds DELAY to every request (an in-region S3 GET
# takes about 10-30 ms). The kernel's caches are dropped before the first epoch and between
# epochs, so every epoch after the first reads from the disk caches, as on nodes whose memory
# does not hold their share. Rows:
#   aifs         aifs_plan.DistributedSampler, caches of CACHE_FRACTION of the set
#   torch        torch.utils.data.DistributedSampler (plans sent by aifs_plan.plan), same caches
#   aifs-small   aifs_plan.DistributedSampler, caches of half a node's range (its range does not
#                fit: the stable subset should give a hit rate of about 0.5)
#   aifs-rotate  aifs_plan.DistributedSampler with rotate_every=1: each epoch every node moves to
#                the next node's range (the S3 cost of more mixing)
#   aifs-kernel  aifs with the kernel data plane (-o data=kernel: EROFS over sparse copies of the
#                shards in the cache directory, filled from S3 chunk by chunk on the reads'
#                fanotify events and on the Loader's reads ahead; docs/kernel.md, "The plane over
#                S3"), cache_size as aifs's; the plane has no prefetch_shards
#   torch-kernel torch's sampler on the kernel plane, the same caches
# The daemon serving each node (under its keeper: lib.sh's daemon_pid) is sampled for CPU time
# every POLL seconds, so the report gives its CPU a sample per epoch.
# Prints two markdown tables (integration/bench/multinode_report.py) and writes them to
# RESULTS; commits nothing. Needs root.
#
# Environment (defaults in brackets):
#   FILES [10000] (mean 110 KiB, log-normal; 100 per class)   NODES [4]   LOCAL [2]   EPOCHS [3]
#   RUNS [3] (median of RUNS runs)   DELAY [10ms]   WORKERS [1]   BATCH [32]
#   CACHE_FRACTION [0.34]   SHARD_SIZE [64M]   POLL [0.2]
#   ROWS ["aifs torch aifs-small aifs-rotate aifs-kernel"] (also torch-kernel)
#   WORKDIR [/var/tmp]   RESULTS [$WORKDIR/aifs-multinode-results.md]
set -euo pipefail

FILES=${FILES:-10000}
NODES=${NODES:-4}
LOCAL=${LOCAL:-2}
EPOCHS=${EPOCHS:-3}
RUNS=${RUNS:-3}
DELAY=${DELAY:-10ms}
WORKERS=${WORKERS:-1}
BATCH=${BATCH:-32}
CACHE_FRACTION=${CACHE_FRACTION:-0.34}
SHARD_SIZE=${SHARD_SIZE:-64M}
POLL=${POLL:-0.2}
ROWS=${ROWS:-aifs torch aifs-small aifs-rotate aifs-kernel}
WORKDIR=${WORKDIR:-/var/tmp}
RESULTS=${RESULTS:-$WORKDIR/aifs-multinode-results.md}
NAME=multinode
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
need_versitygw

unset AWS_CA_BUNDLE AWS_PROFILE AWS_SESSION_TOKEN AWS_DEFAULT_REGION
export AWS_ACCESS_KEY_ID=aifsbench AWS_SECRET_ACCESS_KEY=aifsbenchsecret AWS_REGION=us-east-1

BG_PIDS=""
STATS_DIR=()
POLLER="" # run_row's cpu_poll, while a row runs
multinode_cleanup() {
	[[ -z $POLLER ]] || kill "$POLLER" 2>/dev/null || true
	awk -v run="$RUN" 'index($2, run) == 1 && ($3 ~ /^fuse/ || $3 == "erofs") { print $2 }' /proc/mounts | sort -r |
		while read -r m; do unmount_aifs "$m" 2>/dev/null || umount -l "$m"; done
	for p in $BG_PIDS; do kill "$p" 2>/dev/null || true; done
	sleep 0.5
	cleanup
}
trap multinode_cleanup EXIT

out() { echo "$*" | tee -a "$RESULTS"; }
: >"$RESULTS"
out "multinode.sh: $(date -u +%Y-%m-%dT%H:%MZ), $(machine), commit $(git -C "$REPO" rev-parse --short HEAD), FILES=$FILES NODES=$NODES LOCAL=$LOCAL EPOCHS=$EPOCHS RUNS=$RUNS DELAY=$DELAY WORKERS=$WORKERS BATCH=$BATCH CACHE_FRACTION=$CACHE_FRACTION SHARD_SIZE=$SHARD_SIZE"

# --- the disk, the server, the data ---------------------------------------------------------------
# One ext4 image on a direct-I/O loop device holds versitygw's root (the shard set, twice while
# a multipart upload is assembled) and the nodes' caches (each up to the whole set).
DISK=$RUN/disk
truncate -s "$((FILES * 112640 * (3 + NODES) / 1048576 + 1024))M" "$RUN/disk.img"
mkfs.ext4 -q -F "$RUN/disk.img"
mkdir -p "$DISK"
loopmount "$RUN/disk.img" "$DISK"
mkdir -p "$DISK/root/aifs"

PORT=$($PY -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
EP=http://127.0.0.1:$PORT
"$AIFS_VERSITYGW" --port "127.0.0.1:$PORT" --access "$AWS_ACCESS_KEY_ID" --secret "$AWS_SECRET_ACCESS_KEY" \
	--quiet --keep-alive posix "$DISK/root" >"$RUN/versitygw.log" 2>&1 &
BG_PIDS="$BG_PIDS $!"
for _ in $(seq 100); do (exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null && break; sleep 0.1; done
(exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null || die "versitygw did not start: $(cat "$RUN/versitygw.log")"
start_s3delay "$EP" "$DELAY"
BG_PIDS="$BG_PIDS $S3DELAY_PID"
PROXY=$S3DELAY_EP

go run ./integration/gendata --files "$FILES" --classes $((FILES / 100 > 0 ? FILES / 100 : 1)) "$RUN/src" >&2
DATA=$(du -sb --apparent-size "$RUN/src" | cut -f1)
AWS_ENDPOINT_URL=$EP "$AIFS" pack --quiet --shard-size "$SHARD_SIZE" "$RUN/src" s3://aifs/data
rm -rf "$RUN/src"
NODE_RANGE=$((DATA / NODES))
# The set's shard objects (versitygw's posix backend keeps each object as a file): what a node
# fetches, the files' bytes and their alignment (aifs pack aligns samples for the kernel plane).
SET=$(find "$DISK/root/aifs/data" -name '*.dat' -printf '%s\n' | awk '{s += $1} END {print s}')
out "set: $FILES files, $((DATA / 1000000)) MB ($((SET / 1000000)) MB of shard objects) in shards of $SHARD_SIZE; a node's range: $((NODE_RANGE / 1000000)) MB; S3 fetched is given as a multiple of the shard objects"

# --- one run of one row ------------------------------------------------------------------------------
# cpu_poll FILE PID...: every POLL seconds appends a line "UNIX-SECONDS TICKS..." to FILE, the CPU
# time (user + system, clock ticks) of each PID so far; runs until killed (builtins but sleep).
cpu_poll() {
	local file=$1 line p f
	shift
	while :; do
		line=$EPOCHREALTIME
		for p in "$@"; do
			f=()
			read -r -a f 2>/dev/null <"/proc/$p/stat" || true
			line="$line $((${f[13]:-0} + ${f[14]:-0}))"
		done
		echo "$line" >>"$file"
		sleep "$POLL"
	done
}

# run_row ROW R: mounts NODES fresh nodes, reads EPOCHS epochs on NODES·LOCAL ranks, unmounts;
# the records go to $RUN/out/ROW/run-R: the ranks' (rank-I.json), each node's stats before the
# first epoch (base-K.json) and its daemon's CPU time as it went (cpu.tsv, a column a node).
run_row() {
	local row=$1 r=$2 dir=$RUN/out/$1/run-$2 sampler=aifs rotate=0 plane=fuse cache k rank pid pids="" dpids=""
	cache=$($PY -c "print(int($DATA * $CACHE_FRACTION))")
	case $row in
	torch) sampler=torch ;;
	aifs-small) cache=$((NODE_RANGE / 2)) ;;
	aifs-rotate) rotate=1 ;;
	aifs-kernel) plane=kernel ;;
	torch-kernel) sampler=torch plane=kernel ;;
	esac
	mkdir -p "$dir"
	for k in $(seq 0 $((NODES - 1))); do
		rm -rf "$DISK/cache-$k"
		mkdir -p "$RUN/mnt-$k"
		if [[ $plane == kernel ]]; then
			"$AIFS" mount s3://aifs/data "$RUN/mnt-$k" --s3-endpoint "$PROXY" --cache-dir "$DISK/cache-$k" \
				--cache-size "$cache" -o data=kernel
			[[ $(findmnt -n -o FSTYPE "$RUN/mnt-$k") == erofs ]] || die "row $row: node $k did not mount the kernel plane"
		else
			"$AIFS" mount s3://aifs/data "$RUN/mnt-$k" --s3-endpoint "$PROXY" --cache-dir "$DISK/cache-$k" \
				--cache-size "$cache" -o prefetch_shards=on
		fi
		"$AIFS" stats --json "$RUN/mnt-$k" >"$dir/base-$k.json"
		# the directory holding the node's .aifs: the mount on the FUSE plane, its control mount
		# on the kernel plane
		STATS_DIR[k]=$(dirname "$(dirname "$(stats_file "$RUN/mnt-$k")")")
		pid=$(daemon_pid "$RUN/mnt-$k")
		[[ -n $pid ]] || die "row $row: no daemon found for node $k"
		dpids="$dpids $pid"
	done
	cpu_poll "$dir/cpu.tsv" $dpids &
	POLLER=$!
	dropcaches
	local port
	port=$($PY -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
	for rank in $(seq 0 $((NODES * LOCAL - 1))); do
		k=$((rank / LOCAL))
		RANK=$rank WORLD_SIZE=$((NODES * LOCAL)) LOCAL_RANK=$((rank % LOCAL)) LOCAL_WORLD_SIZE=$LOCAL \
			MASTER_ADDR=127.0.0.1 MASTER_PORT=$port OMP_NUM_THREADS=1 \
			$PY integration/torchcheck/cluster.py --root "$RUN/mnt-$k" --stats "${STATS_DIR[k]}" --sampler "$sampler" \
			--rotate-every "$rotate" --epochs "$EPOCHS" --batch "$BATCH" --workers "$WORKERS" --seed "$r" \
			--drop-caches --out "$dir/rank-$rank.json" 2>>"$RUN/ranks.log" &
		pids="$pids $!"
	done
	for p in $pids; do wait "$p" || die "a rank of row $row failed: $(tail -20 "$RUN/ranks.log")"; done
	kill "$POLLER"
	wait "$POLLER" 2>/dev/null || true
	POLLER=""
	for k in $(seq 0 $((NODES - 1))); do
		unmount_aifs "$RUN/mnt-$k"
	done
	# the daemons finish writing their caches and exit before the next row removes them
	for _ in $(seq 300); do pgrep -f "aifs mount s3://aifs/data $RUN/mnt-" >/dev/null || break; sleep 0.1; done
	! pgrep -f "aifs mount s3://aifs/data $RUN/mnt-" >/dev/null || die "row $row: a daemon did not exit within 30 s of its unmount"
	echo "$row run $r done" >&2
}

# Rows interleaved within each run, so that a drift of the machine touches every row alike.
for r in $(seq 1 "$RUNS"); do
	for row in $ROWS; do
		run_row "$row" "$r"
	done
done

out ""
dirs=()
for row in $ROWS; do dirs+=("$RUN/out/$row"); done
$PY integration/bench/multinode_report.py "$SET" "$BATCH" "${dirs[@]}" | tee -a "$RESULTS"
