#!/usr/bin/env bash
# pack_vs_tar.sh — measures `aifs pack` throughput against `tar -cf` of the same tree, on the same
# disk, in the same run, with the page cache dropped before every timed command.
#
# It generates an ImageNet-like tree (log-normal sizes, mean 110 KiB) with integration/gendata,
# builds aifs, then for each round times `tar -cf OUT.tar -C SRC .` and `aifs pack --quiet SRC DST`,
# removing both outputs after the round. It prints per-round and median seconds and MB/s
# (dataset bytes / time, 1 MB = 10^6 bytes) and the aifs/tar throughput ratio.
#
# aifs pack fsyncs its shards and index before it returns; tar does not. Each tar time is therefore
# reported twice: tar alone (data may still be in the page cache) and tar followed by `sync`.
#
# Environment (defaults in brackets):
#   FILES       number of files [50000]        CLASSES    class directories [1000]
#   MEAN_SIZE   mean file size in bytes [112640]
#   ROUNDS      timed rounds [3]               PACK_FLAGS extra flags for aifs pack []
#   WORKDIR     parent directory for the scratch directory [/var/tmp]; the script creates
#               WORKDIR/aifs-bench.XXXXXX and removes it (and only it) on exit or interrupt.
# Dropping caches needs root; without it the script says so and measures with warm caches.
set -euo pipefail

FILES=${FILES:-50000}
CLASSES=${CLASSES:-1000}
MEAN_SIZE=${MEAN_SIZE:-112640}
ROUNDS=${ROUNDS:-3}
PACK_FLAGS=${PACK_FLAGS:-}
WORKDIR=${WORKDIR:-/var/tmp}
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)

die() { echo "pack_vs_tar: $*" >&2; exit 1; }

# --- scratch directory and cleanup -------------------------------------------------------------
[[ -d $WORKDIR ]] || die "WORKDIR $WORKDIR is not a directory"
RUN=$(mktemp -d "$WORKDIR/aifs-bench.XXXXXX")
child=""
cleanup() {
	# Stop a timed command still running (we run them in the background so signals are seen at
	# once), then remove everything this script wrote. Safe to call twice.
	if [[ -n $child ]]; then kill "$child" 2>/dev/null || true; wait "$child" 2>/dev/null || true; child=""; fi
	if [[ -n ${RUN:-} && -d $RUN ]]; then rm -rf -- "$RUN"; fi
}
trap cleanup EXIT
trap 'echo "pack_vs_tar: interrupted, cleaning up" >&2; cleanup; exit 130' INT TERM HUP

# run CMD... in the background and wait for it, so an interrupt reaches the trap immediately.
run() {
	"$@" &
	child=$!
	wait "$child"
	child=""
}

# --- free space: source + tar + shard set ≈ 3× the dataset, plus 5% ------------------------------
est=$((FILES * MEAN_SIZE))
need=$((est * 3 + est / 20))
avail=$(df --output=avail -B1 "$RUN" | tail -n 1 | tr -d ' ')
if ((avail < need)); then
	die "not enough free space in $WORKDIR: need about $((need / 1000000000)) GB (3x the $((est / 1000000000)) GB dataset), have $((avail / 1000000000)) GB; lower FILES or set WORKDIR"
fi

# --- machine -----------------------------------------------------------------------------------
dev=$(df --output=source "$RUN" | tail -n 1)
echo "== machine"
echo "cpu:     $(nproc) cores, $(lscpu 2>/dev/null | sed -n 's/^Model name: *//p' | head -n 1)"
echo "memory:  $(free -h | awk '/^Mem:/ {print $2 " total, " $7 " available"}')"
echo "kernel:  $(uname -srm)"
echo "workdir: $RUN"
df -hT "$RUN" | sed 's/^/  /'
lsblk -o NAME,SIZE,TYPE,ROTA,MODEL,FSTYPE,MOUNTPOINTS "$dev" 2>/dev/null | sed 's/^/  /' || echo "  (lsblk: no information for $dev)"
echo "mount:   $(findmnt -no FSTYPE,OPTIONS --target "$RUN" 2>/dev/null || echo unknown)"
echo "go:      $(go version)"

# --- build and generate ------------------------------------------------------------------------
echo "== setup"
run go -C "$REPO" build -o "$RUN/aifs" ./cmd/aifs
run go -C "$REPO" build -o "$RUN/gendata" ./integration/gendata
run "$RUN/gendata" --files "$FILES" --classes "$CLASSES" --mean-size "$MEAN_SIZE" "$RUN/src"
bytes=$(find "$RUN/src" -type f -printf '%s\n' | awk '{s += $1} END {printf "%.0f", s}')
echo "dataset: $FILES files, $bytes bytes ($(awk -v b="$bytes" 'BEGIN {printf "%.2f", b / 1e9}') GB)"

warned=""
drop_caches() {
	sync
	if ! { echo 3 >/proc/sys/vm/drop_caches; } 2>/dev/null; then
		[[ -n $warned ]] || echo "note: cannot drop caches (not root?); continuing with warm caches" >&2
		warned=1
	fi
}
now() { date +%s.%N; }
secs() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.2f", b - a}'; }
mbps() { awk -v s="$1" -v b="$bytes" 'BEGIN {printf "%.1f", b / 1e6 / s}'; }
median() { printf '%s\n' "$@" | sort -g | awk '{v[NR] = $1} END {printf "%.2f", NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }

# --- timed rounds ------------------------------------------------------------------------------
echo "== rounds (MB/s = dataset bytes / seconds)"
tar_s=() tsync_s=() pack_s=()
for ((r = 1; r <= ROUNDS; r++)); do
	drop_caches
	t0=$(now)
	run tar -cf "$RUN/out.tar" -C "$RUN/src" .
	t1=$(now)
	sync
	t2=$(now)
	tar_s+=("$(secs "$t0" "$t1")") tsync_s+=("$(secs "$t0" "$t2")")
	rm -f "$RUN/out.tar"

	drop_caches
	t0=$(now)
	# shellcheck disable=SC2086 # PACK_FLAGS is a list of flags
	run "$RUN/aifs" pack --quiet $PACK_FLAGS "$RUN/src" "$RUN/dst"
	t1=$(now)
	pack_s+=("$(secs "$t0" "$t1")")
	if ((r == 1)); then shard_bytes=$(du -sb "$RUN/dst" | cut -f1); fi
	rm -rf "$RUN/dst"

	printf 'round %d: tar %7.2f s %7s MB/s | tar+sync %7.2f s %7s MB/s | aifs pack %7.2f s %7s MB/s\n' "$r" \
		"${tar_s[-1]}" "$(mbps "${tar_s[-1]}")" "${tsync_s[-1]}" "$(mbps "${tsync_s[-1]}")" \
		"${pack_s[-1]}" "$(mbps "${pack_s[-1]}")"
done
echo "shard set size: $shard_bytes bytes"

mt=$(median "${tar_s[@]}") ms=$(median "${tsync_s[@]}") mp=$(median "${pack_s[@]}")
printf 'median:  tar %7.2f s %7s MB/s | tar+sync %7.2f s %7s MB/s | aifs pack %7.2f s %7s MB/s\n' \
	"$mt" "$(mbps "$mt")" "$ms" "$(mbps "$ms")" "$mp" "$(mbps "$mp")"
awk -v t="$mt" -v s="$ms" -v p="$mp" \
	'BEGIN {printf "ratio aifs/tar throughput (medians): %.2f vs tar, %.2f vs tar+sync\n", t / p, s / p}'
