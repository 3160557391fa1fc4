#!/usr/bin/env bash
# formats.sh — the sources aifs index reads in place besides tars (ZIP, TFRecord, Hugging Face
# Arrow and Parquet) against reading them and against aifs pack, side by side in one run on one
# disk. It
#   1. writes, for each format in FORMATS, ARCHIVES files of MEMBERS random samples each (sizes
#      uniform over MEMBER_SIZE/2 to 3×MEMBER_SIZE/2; integration/genarchives: ZIPs of stored
#      members as Go's archive/zip writes them, TFRecord files with the ImageNet script's keys,
#      Arrow IPC streams and uncompressed PLAIN Parquet with the schema `datasets` writes) to an
#      ext4 image loop-mounted with direct I/O, and measures, RUNS passes, the formats in turn,
#      caches dropped before each command: `cat` of the files to /dev/null; `aifs index` with
#      checksums (ZIP: the central directories' CRC-32s; the others: CRC32C of every image and
#      of every file) and with --no-checksums, each with its CPU time and peak RSS; and `aifs
#      index` with checksums again with the files in the page cache (warm: the index's own work
#      without the disk, which bounds the cold index on this machine's cores); then mounts each
#      checksummed index, caches dropped: the seconds `aifs mount` takes
#      to return (the mount is live), the daemon's VmRSS, `find MNT | wc -l` and the VmRSS after;
#   2. generates JPEGS real JPEGs (gendata --jpeg, mean ~110 KB, JPEGS/100 classes) on a second
#      ext4 image, and writes them, twice each, as a shard set by aifs pack, a shard set packed
#      with --align 1 (the control: samples end to end, unaligned, as the formats hold them), a
#      ZIP by Info-ZIP's zip -0 (CLASS/FILE members, in the order zip walks the tree; and a second
#      ZIP of them in path order, the order of the packed set and of the other formats' files) and
#      JPEGS/1000 files of each other format (genarchives -tree), in the order pack a, then the others' copies a, then their copies b
#      in the reverse order, then pack b (where a set lies on the disk moves its speed by 10-20%:
#      tars.sh);
#      indexes each with --view imagefolder (hf: --schema-class-names), mounts them all, and reads
#      the tree on ext4 and every mount in turn: cold shuffled epochs at each reader count in
#      JOBS (`aifs bench --drop-caches --relist`, one epoch a pass, RUNS passes, the first system
#      read moving each pass; aifs bench fails unless all served the same paths and bytes), with
#      each daemon's CPU a file and the bytes it read from its files over the dataset's;
#   3. writes OUT/formats.md (the machine, the figures, the ratios against the issue's targets)
#      and OUT/formats.tsv (every figure and its passes).
# A figure is the median of its passes; a ratio, the median of the passes' ratios, copy a paired
# with pack a and copy b with pack b. Commits nothing. Needs root (loop devices, mounts,
# drop_caches). About 20 minutes with the defaults on 2 cores. SMOKE=1 is a tiny run (a minute):
# 2 files of 500 samples a format, 300 JPEGs, 1 pass, the report written to a temporary folder;
# it fails if a step fails or a row is missing from the report.
#
# Environment (defaults in brackets; SMOKE=1's in braces):
#   FORMATS ["zip tfrecord arrow parquet"]  ARCHIVES [100] {2}  MEMBERS [12800] {500}
#   MEMBER_SIZE [1024] (bytes, mean)  JPEGS [10000] {300}  JOBS ["1 8"] {"1 2"}  RUNS [3] {1}
#   WORKDIR [/var/tmp]  OUT [docs/bench, from the checkout] {a temporary folder}  NOTE [empty]
set -euo pipefail

SMOKE=${SMOKE:-0}
if [[ $SMOKE == 1 ]]; then
	: "${ARCHIVES:=2}" "${MEMBERS:=500}" "${JPEGS:=300}" "${JOBS:=1 2}" "${RUNS:=1}"
fi
FORMATS=${FORMATS:-zip tfrecord arrow parquet}
ARCHIVES=${ARCHIVES:-100}
MEMBERS=${MEMBERS:-12800}
MEMBER_SIZE=${MEMBER_SIZE:-1024}
JPEGS=${JPEGS:-10000}
JOBS=${JOBS:-1 8}
RUNS=${RUNS:-3}
WORKDIR=${WORKDIR:-/var/tmp}
NOTE=${NOTE:-}
NAME=formats
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
need_packages zip time
if [[ $SMOKE == 1 ]]; then OUT=$RUN/out; else OUT=${OUT:-docs/bench}; fi
mkdir -p "$OUT"
started=$SECONDS
RES=$RUN/results
mkdir "$RES"
go build -o "$RUN/genarchives" ./integration/genarchives

echo "== machine: $(machine)" >&2
meta machine "$(machine)"
meta date "$(date -u +%F)"
meta load "$(cut -d' ' -f1-3 /proc/loadavg)"
meta commit "$(commit_desc "$OUT")"
for v in FORMATS ARCHIVES MEMBERS MEMBER_SIZE JPEGS JOBS RUNS SMOKE NOTE; do meta "$v" "${!v}"; done

# --- 1. ARCHIVES×MEMBERS small samples a format: index time against cat, mount ------------------
small=$RUN/small
nformats=$(wc -w <<<"$FORMATS")
fs_image ext4 $((nformats * ARCHIVES * MEMBERS * (MEMBER_SIZE + 200) / 1048576 * 5 / 4 + 1024)) "$small"
for f in $FORMATS; do
	"$RUN/genarchives" -format "$f" -n "$ARCHIVES" -members "$MEMBERS" -size "$MEMBER_SIZE" "$small/$f"
	meta "bytes-$f" "$(du -sb --apparent-size "$small/$f" | cut -f1)"
done
echo "== $ARCHIVES files of $MEMBERS samples a format written after $((SECONDS - started)) s" >&2
for p in $(seq "$RUNS"); do
	for f in $FORMATS; do
		dropcaches
		timed "index-$f.cat" cpu_rss "cpu-index-$f.cat" "rss-index-$f.cat" cat "$small/$f"/* >/dev/null
		# Each pass indexes afresh, as a first index does (--force would load the old index first).
		rm -f "$small/idx-$f/index.aifs" "$small/nosum-$f/index.aifs"
		dropcaches
		timed "index-$f.aifs" cpu_rss "cpu-index-$f.aifs" "rss-index-$f.aifs" "$AIFS" index --quiet "$small/$f" "$small/idx-$f"
		dropcaches
		timed "index-$f.nosum" cpu_rss "cpu-index-$f.nosum" "rss-index-$f.nosum" "$AIFS" index --quiet --no-checksums "$small/$f" "$small/nosum-$f"
		cat "$small/$f"/* >/dev/null # warm: every file in the page cache
		rm -f "$small/idx-$f/index.aifs"
		timed "index-$f.warm" cpu_rss "cpu-index-$f.warm" "rss-index-$f.warm" "$AIFS" index --quiet "$small/$f" "$small/idx-$f"
	done
	echo "== index pass $p done after $((SECONDS - started)) s" >&2
done
mkdir "$RUN/mnt-small"
for f in $FORMATS; do
	meta "index_bytes-$f" "$(stat -c %s "$small/idx-$f/index.aifs")"
	for p in $(seq "$RUNS"); do
		dropcaches
		timed "mount-$f.aifs" "$AIFS" mount "$small/idx-$f" "$RUN/mnt-small"
		pid=$(daemon_pid "$small/idx-$f")
		[[ -n $pid ]] || die "no daemon found for the mount of $small/idx-$f"
		rss_kib "$pid" >>"$RES/rss-mounted-$f.aifs"
		timed "list-$f.aifs" listing "$RUN/mnt-small" $((1 + ARCHIVES + ARCHIVES * MEMBERS))
		rss_kib "$pid" >>"$RES/rss-listed-$f.aifs"
		unmount_daemon "$RUN/mnt-small" "$pid"
	done
done
echo "== mounts done after $((SECONDS - started)) s" >&2

# --- 2. JPEGS JPEGs in every format, through the imagefolder views, against aifs pack and ext4 ---
jpeg=$RUN/jpeg
fs_image ext4 $((JPEGS * 112640 / 1048576 * (2 * nformats + 10) + 1024)) "$jpeg" # tree, 2 × (packed, unaligned, zipsorted, each format)
go run ./integration/gendata --jpeg --files "$JPEGS" --classes $((JPEGS / 100 > 0 ? JPEGS / 100 : 1)) "$jpeg/tree" >&2
jpeg_bytes=$(du -sb --apparent-size "$jpeg/tree" | cut -f1)
meta jpeg_bytes "$jpeg_bytes"
# copy FORMAT C writes copy C of the tree in FORMAT and indexes it (pack: packs it) to $jpeg/F-C.
copy() {
	local f=$1 c=$2 src=$jpeg/$1-$2-src
	local idx=(--view imagefolder)
	case $f in
	packed)
		dropcaches
		timed "jpeg-pack.$c" "$AIFS" pack --quiet "$jpeg/tree" "$jpeg/$f-$c"
		return
		;;
	unaligned) # the control: packed as the formats lie, each sample where the last one ends
		"$AIFS" pack --quiet --align 1 "$jpeg/tree" "$jpeg/$f-$c"
		return
		;;
	zip) (cd "$jpeg/tree" && zip -q -0 -r -X "$src.zip" .) ;;                                   # in the order zip walks the tree
	zipsorted) (cd "$jpeg/tree" && find . -type f | LC_ALL=C sort | zip -q -0 -X -@ "$src.zip") ;; # in path order, as the others
	*) "$RUN/genarchives" -format "$f" -n $((JPEGS / 1000 > 0 ? JPEGS / 1000 : 1)) -tree "$jpeg/tree" "$src" ;;
	esac
	[[ $f == arrow || $f == parquet ]] && idx+=(--schema-class-names)
	dropcaches
	timed "jpeg-index-$f.$c" "$AIFS" index --quiet "${idx[@]}" "$src"* "$jpeg/$f-$c"
}
ORDER=(packed unaligned $FORMATS)
[[ " $FORMATS " != *" zip "* ]] || ORDER+=(zipsorted)
meta EPOCH_SYSTEMS "${ORDER[*]}"
for f in "${ORDER[@]}"; do copy "$f" a; done
for ((i = ${#ORDER[@]} - 1; i >= 0; i--)); do copy "${ORDER[i]}" b; done
SYSTEMS=(ext4)
DIRS=("$jpeg/tree")
PIDS=("")
for c in a b; do
	for f in "${ORDER[@]}"; do
		SYSTEMS+=("$f-$c")
		DIRS+=("$RUN/mnt-$f-$c")
		mkdir "$RUN/mnt-$f-$c"
		"$AIFS" mount "$jpeg/$f-$c" "$RUN/mnt-$f-$c"
		PIDS+=("$(daemon_pid "$jpeg/$f-$c")")
		[[ -n ${PIDS[-1]} ]] || die "no daemon found for the mount of $jpeg/$f-$c"
	done
done
echo "== $JPEGS JPEGs ready after $((SECONDS - started)) s" >&2

# counters MNT PID prints the CPU ticks of the daemon PID so far and the bytes it read from its
# files (its stats' backend.bytes); counted CASE SYSTEM BEFORE MNT PID appends, from the counters
# BEFORE an epoch to now, the daemon's CPU µs a file to cpu-CASE.SYSTEM and the bytes it read
# over the dataset's to disk-CASE.SYSTEM.
counters() {
	echo "$(cpu_ticks "$2") $($PY -c 'import json,sys; print(json.load(open(sys.argv[1]))["backend"]["bytes"])' "$(stats_file "$1")")"
}
counted() {
	local case=$1 system=$2 t0 b0 t1 b1
	read -r t0 b0 <<<"$3"
	read -r t1 b1 <<<"$(counters "$4" "$5")"
	awk -v t="$((t1 - t0))" -v hz="$(getconf CLK_TCK)" -v f="$JPEGS" 'BEGIN {printf "%.1f\n", t / hz * 1e6 / f}' >>"$RES/cpu-$case.$system"
	awk -v b="$((b1 - b0))" -v n="$jpeg_bytes" 'BEGIN {printf "%.4f\n", b / n}' >>"$RES/disk-$case.$system"
}
for j in $JOBS; do
	for p in $(seq "$RUNS"); do
		out=$RUN/cold-$j-$p.json
		k=$(((p - 1) % ${#DIRS[@]}))
		before=("")
		for ((i = 1; i < ${#DIRS[@]}; i++)); do before+=("$(counters "${DIRS[i]}" "${PIDS[i]}")"); done
		"$AIFS" bench --json --drop-caches --relist --seed "$p" -j "$j" "${DIRS[@]:k}" "${DIRS[@]:0:k}" >"$out" ||
			{ cat "$out" >&2; die "cold-$j pass $p: aifs bench failed (a read error, or the systems served different bytes)"; }
		read -r -a v < <($PY -c 'import json,sys; print(*(round(p["files_per_s"], 1) for p in json.load(open(sys.argv[1]))["passes"]))' "$out")
		v=("${v[@]:${#v[@]}-k}" "${v[@]:0:${#v[@]}-k}") # back in the order of DIRS
		for i in "${!DIRS[@]}"; do echo "${v[i]}" >>"$RES/cold-$j.${SYSTEMS[i]}"; done
		for ((i = 1; i < ${#DIRS[@]}; i++)); do counted "cold-$j" "${SYSTEMS[i]}" "${before[i]}" "${DIRS[i]}" "${PIDS[i]}"; done
	done
	echo "== cold shuffled epochs with $j readers done after $((SECONDS - started)) s" >&2
done
meta seconds $((SECONDS - started))
meta load_end "$(cut -d' ' -f1-3 /proc/loadavg)"

# --- 3. the report ------------------------------------------------------------------------------
$PY integration/bench/formats_report.py "$RES" "$OUT"
if [[ $SMOKE == 1 ]]; then # every format must have made its rows
	for f in $FORMATS; do
		grep -q "^index-$f	aifs	" "$OUT/formats.tsv" || die "smoke: no index row for $f in formats.tsv"
		grep -q "^cold-1	$f-b	" "$OUT/formats.tsv" || die "smoke: no epoch row for $f in formats.tsv"
	done
	echo "== smoke run passed" >&2
fi
