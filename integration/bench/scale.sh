#!/usr/bin/env bash
# scale.sh — the figures of the scale issue (100 million samples on one mount): the index's size,
# the time from `aifs mount` to a live mount, the daemon's RSS, lookups on one core and the
# listing of huge directories, at 1.28 M, 10 M and 100 M samples, side by side in one run. It
#   1. today against before: writes a tree of TREE empty files (ImageNet-like names,
#      DIR/nCLASS/nCLASS_NUMBER.JPEG, 1,000 directories) and packs it with the aifs of commit BASE
#      (before index version 3) and with this checkout's, each under GNU time (seconds, CPU, peak
#      RSS: pack's memory), then mounts each set RUNS times, the two taking turns: caches dropped,
#      the seconds `aifs mount` takes to return (it returns once the mount is live), the daemon's
#      VmRSS, the seconds of a listing of every directory (os.walk, names and types only) and the
#      daemon's VmRSS after it; then a mount with the index in the page cache (warm); and both
#      checkouts' BenchmarkIndexLookup (layout's 1.28 M-sample index, one core);
#   2. at each SIZES entry (SAMPLES:DIRECTORIES): a set written by integration/genindex (the index
#      as aifs pack writes it, over sparse shards), its index's bytes, then RUNS cold mounts (the
#      seconds to live, VmRSS) and warm ones, one listing of every directory with VmRSS after it,
#      and integration/indexbench under taskset on one core (GOMAXPROCS=1): 1 M random lookups by
#      (directory, name) on a freshly loaded index, cold (every block read and checked on first
#      use) and warm (the median of 5 passes);
#   3. a directory of BIGDIR entries: the same names on ext4 (an image, loop-mounted with direct
#      I/O) and through aifs, os.scandir of it, caches dropped, RUNS passes taking turns; and the
#      peak RSS of `aifs ls SET DIR` and `aifs verify SET` of that set (1 KiB samples);
#   4. writes OUT/scale.md (the machine, the figures as medians of their passes, the targets) and
#      OUT/scale.tsv (every pass).
# Commits nothing. Needs root (mounts, drop_caches, loop devices) and about 20 GB free in WORKDIR
# for the 100 M set (7 GB of index; the shards are sparse). About 25 minutes with the defaults.
#
# Environment (defaults in brackets):
#   TREE [1281167]  BASE [cb8f919]  SIZES ["1281167:1000 10000000:10000 100000000:100000"]
#   BIGDIR [1000000]  RUNS [3]  WORKDIR [/var/tmp]  OUT [docs/bench]  NOTE [empty]
set -euo pipefail

TREE=${TREE:-1281167}
BASE=${BASE:-cb8f919}
SIZES=${SIZES:-1281167:1000 10000000:10000 100000000:100000}
BIGDIR=${BIGDIR:-1000000}
RUNS=${RUNS:-3}
WORKDIR=${WORKDIR:-/var/tmp}
OUT=${OUT:-docs/bench}
NOTE=${NOTE:-}
NAME=scale
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
need_packages time
mkdir -p "$OUT"
started=$SECONDS

RES=$RUN/results
mkdir "$RES"
put() { echo "$2" >>"$RES/$1"; }
rss_bytes() { awk '/^VmRSS:/ {print $2 * 1024}' "/proc/$1/status"; }
# usage FIGURE CMD... runs CMD under GNU time: FIGURE's seconds, CPU seconds and peak RSS (bytes).
usage() {
	local figure=$1 wall user sys rss
	shift
	/usr/bin/time -o "$RUN/usage" -f '%e %U %S %M' "$@"
	read -r wall user sys rss <"$RUN/usage"
	put "secs.$figure" "$wall"
	put "cpu.$figure" "$(echo "$user $sys" | awk '{print $1 + $2}')"
	put "peak_rss.$figure" $((rss * 1024))
}
# walk DIR N lists every directory under DIR (names and types, no stat) and fails unless it
# finds N entries.
walk() {
	local n
	n=$($PY -c 'import os, sys
print(sum(len(d) + len(f) for _, d, f in os.walk(sys.argv[1])))' "$1")
	[[ $n -eq $2 ]] || die "walk $1 found $n entries, not $2"
}
# mount_set CASE AIFS SET ENTRIES LIST: RUNS cold mounts of SET with AIFS (seconds to live,
# VmRSS; with LIST=all a listing every run, LIST=once the first run only, and VmRSS after it),
# then RUNS warm mounts (seconds). Results under CASE.
mount_set() {
	local case=$1 aifs=$2 set=$3 entries=$4 list=$5 mnt=$RUN/mnt pid r
	mkdir -p "$mnt"
	for r in $(seq "$RUNS"); do
		dropcaches
		timed "mount_cold.$case" "$aifs" mount "$set" "$mnt"
		pid=$(daemon_pid "$mnt")
		put "rss_mount.$case" "$(rss_bytes "$pid")"
		if [[ $list == all || $r -eq 1 ]]; then
			timed "list.$case" walk "$mnt" "$((entries - 1))"
			put "rss_list.$case" "$(rss_bytes "$pid")"
		fi
		unmount_daemon "$mnt" "$pid"
	done
	for r in $(seq "$RUNS"); do
		cat "$set/index.aifs" >/dev/null
		timed "mount_warm.$case" "$aifs" mount "$set" "$mnt"
		pid=$(daemon_pid "$mnt")
		unmount_daemon "$mnt" "$pid"
	done
}

echo "== machine: $(machine)" >&2
meta machine "$(machine)"
meta date "$(date -u +%F)"
meta load "$(cut -d' ' -f1-3 /proc/loadavg)"
meta commit "$(commit_desc "$OUT")"
for v in TREE BASE SIZES BIGDIR RUNS NOTE; do meta "$v" "${!v}"; done
go build -o "$RUN/genindex" ./integration/genindex
go build -o "$RUN/indexbench" ./integration/indexbench

# --- 1. before and after, on a real tree of TREE empty files -------------------------------------
echo "== the aifs of $BASE" >&2
git worktree prune # an interrupted run's
git worktree add -q --detach "$RUN/base" "$BASE"
(cd "$RUN/base" && go build -o "$RUN/base-bin/aifs" ./cmd/aifs)
echo "== a tree of $TREE empty files" >&2
$PY - "$RUN/tree" "$TREE" <<'PYEOF'
import os, sys
root, n = sys.argv[1], int(sys.argv[2])
dirs = 1000
for d in range(dirs):
    cls = "n%08d" % (1440764 + d * 937)
    os.makedirs(os.path.join(root, cls))
    for k in range(n // dirs + (d < n % dirs)):
        os.close(os.open(os.path.join(root, cls, "%s_%08d.JPEG" % (cls, k)), os.O_CREAT | os.O_WRONLY, 0o644))
PYEOF
for sys in base now; do
	aifs=$AIFS
	[[ $sys == base ]] && aifs=$RUN/base-bin/aifs
	dropcaches
	usage "pack.$sys" "$aifs" pack --quiet "$RUN/tree" "$RUN/set.$sys"
	put "index_bytes.tree.$sys" "$(stat -c %s "$RUN/set.$sys/index.aifs")"
done
for r in $(seq "$RUNS"); do
	order="base now"
	[[ $((r % 2)) -eq 0 ]] && order="now base"
	for sys in $order; do
		aifs=$AIFS
		[[ $sys == base ]] && aifs=$RUN/base-bin/aifs
		RUNS=1 mount_set "tree.$sys" "$aifs" "$RUN/set.$sys" $((TREE + 1001)) all
	done
done
for sys in base now; do
	dir=$REPO
	[[ $sys == base ]] && dir=$RUN/base
	(cd "$dir" && go test ./layout -run '^$' -bench 'IndexLookup' -benchtime 3000000x -count "$RUNS") |
		awk '/lookups\/s/ {for (i = 1; i < NF; i++) if ($(i+1) == "lookups/s") print $i}' >>"$RES/lookups.tree.$sys"
done
rm -rf "$RUN/tree" "$RUN/set.base" "$RUN/set.now"
git worktree remove --force "$RUN/base"

# --- 2. 1.28 M, 10 M, 100 M samples ---------------------------------------------------------------
for spec in $SIZES; do
	n=${spec%%:*} d=${spec##*:}
	set=$RUN/gen
	echo "== $n samples in $d directories" >&2
	usage "gen.$n" "$RUN/genindex" -samples "$n" -dirs "$d" -real 100 "$set" >"$RUN/gen.json"
	put "index_bytes.$n" "$(stat -c %s "$set/index.aifs")"
	put "dirs.$n" "$d"
	mount_set "$n" "$AIFS" "$set" $((n + d + 1)) once
	dropcaches
	GOMAXPROCS=1 taskset -c 0 "$RUN/indexbench" "$set" >"$RUN/lookups.json"
	$PY -c 'import json, sys
j = json.load(open(sys.argv[1]))
for k in ("cold_lookups_per_s", "warm_lookups_per_s", "load_ms"):
    open(sys.argv[2] + "/" + k + "." + sys.argv[3], "a").write("%s\n" % j[k])' "$RUN/lookups.json" "$RES" "$n"
	rm -rf "$set"
done

# --- 3. one directory of BIGDIR entries, aifs against ext4 ----------------------------------------
echo "== a directory of $BIGDIR entries" >&2
big=$RUN/big
"$RUN/genindex" -samples "$BIGDIR" -dirs 1 -real 0 -size 1024 "$big" >/dev/null
mkdir -p "$RUN/mnt"
"$AIFS" mount "$big" "$RUN/mnt"
cls=$(ls "$RUN/mnt")
fs_image ext4 $((BIGDIR / 1000 + 512)) "$RUN/ext4" -N $((BIGDIR + 1000))
mkdir "$RUN/ext4/$cls"
$PY -c 'import os, sys
src, dst = sys.argv[1], sys.argv[2]
for e in os.scandir(src):
    os.close(os.open(os.path.join(dst, e.name), os.O_CREAT | os.O_WRONLY, 0o644))' "$RUN/mnt/$cls" "$RUN/ext4/$cls"
scandir() {
	local n
	n=$($PY -c 'import os, sys
print(sum(1 for _ in os.scandir(sys.argv[1])))' "$1")
	[[ $n -eq $BIGDIR ]] || die "scandir $1 found $n entries, not $BIGDIR"
}
for r in $(seq "$RUNS"); do
	order="aifs ext4"
	[[ $((r % 2)) -eq 0 ]] && order="ext4 aifs"
	for sys in $order; do
		dir=$RUN/mnt/$cls
		[[ $sys == ext4 ]] && dir=$RUN/ext4/$cls
		dropcaches
		timed "scandir.$sys" scandir "$dir"
	done
done
unmount_daemon "$RUN/mnt" "$(daemon_pid "$RUN/mnt")"
usage "ls" sh -c "\"$AIFS\" ls \"$big\" \"$cls\" | wc -l >/dev/null"
usage "verify" "$AIFS" verify --quiet "$big"
put "index_bytes.big" "$(stat -c %s "$big/index.aifs")"

meta seconds $((SECONDS - started))
$PY integration/bench/scale_report.py "$RES" "$OUT"
echo "== wrote $OUT/scale.md and $OUT/scale.tsv ($((SECONDS - started)) s)" >&2
