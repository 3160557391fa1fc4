#!/usr/bin/env bash
# s3.sh — the figures of the S3 issue, side by side in one run, every system on one disk and one
# S3 server (versitygw, posix backend, on 127.0.0.1):
#   1. cold shuffled epoch over S3 at each reader count in JOBS: aifs mounting the shard set from
#      s3:// (a fresh mount with an empty --cache-dir; also with -o prefetch_shards=on, with no
#      disk cache at all, and on the kernel data plane: -o data=kernel with an empty cache
#      directory, EROFS over sparse copies of the shards filled from S3 on the reads' fanotify
#      events, docs/kernel.md "The plane over S3") against s3fs-fuse and `rclone mount` reading the same files stored
#      one object per file (target: aifs ≥ 5× the better of the two). Each run mounts every
#      system afresh and drops the kernel's caches: nothing is cached anywhere but the names
#      (aifs bench lists the tree, timed, drops the caches and lists it again, untimed, before
#      it reads: a training job lists its dataset and then reads it, with the names in the
#      kernel's caches and the data cold);
#   1b. the same with DELAY added to every S3 request by a proxy (integration/s3delay) in front
#      of the server: the time to first byte of a real object store (versitygw on 127.0.0.1
#      answers in well under a millisecond; an in-region S3 GET takes about 10-30 ms), which a
#      client pays per request, and so per file in the per-file layout;
#   2. later epochs of aifs from its disk cache (--cache-dir on the same disk, filled by one cold
#      epoch) against aifs mounting the same tree packed on the local disk (target ≥ 0.8×),
#      with the bytes fetched from S3 meanwhile (should be 0); in the same epochs (one aifs bench
#      over all of them) the kernel plane from its copies, filled by one cold epoch of its own
#      (WARM_KERNEL);
#   3. time from `aifs mount s3://...` to a torchvision ImageFolder over NAMES samples in 1,000
#      classes (tiny files: only the names matter), against listing the same names stored one
#      object per file (`rclone lsf -R --fast-list`, the quickest per-file listing measured), and
#      an ImageFolder over an rclone mount of the per-file bucket (NAMES_MOUNT_RUNS runs).
# One ext4 image on a direct-I/O loop device (WORKDIR) holds versitygw's root (the per-file trees
# are written straight into bucket directories, which versitygw serves as objects; the shard sets
# are uploaded by `aifs pack`), the disk cache, and nothing else; caches are dropped before every
# cold measurement. Prints markdown tables and writes them to RESULTS; commits nothing. Needs root.
#
# Environment (defaults in brackets):
#   FILES [10000] (mean 110 KiB, log-normal)   JOBS ["8 32"]   RUNS [3] (median of RUNS runs)
#   DELAY [10ms] ("" skips part 1b)   NAMES [1280000] (0 skips part 3)   NAMES_MOUNT_RUNS [1] (0 skips the ImageFolder over rclone)
#   SYSTEMS ["aifs aifs-staged aifs-nocache aifs-kernel s3fs rclone"] (part 1's columns; the first
#   four are aifs with an empty disk cache, with prefetch_shards=on, without a disk cache, and on
#   the kernel plane with an empty cache directory)   WARM_KERNEL [1] ("" leaves the kernel plane
#   out of part 2)
#   WORKDIR [/var/tmp]   RESULTS [$WORKDIR/aifs-s3-results.md]
set -euo pipefail

FILES=${FILES:-10000}
JOBS=${JOBS:-8 32}
RUNS=${RUNS:-3}
NAMES=${NAMES:-1280000}
DELAY=${DELAY-10ms}
NAMES_MOUNT_RUNS=${NAMES_MOUNT_RUNS:-1}
WARM_KERNEL=${WARM_KERNEL-1}
WORKDIR=${WORKDIR:-/var/tmp}
RESULTS=${RESULTS:-$WORKDIR/aifs-s3-results.md}
NAME=s3
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
need_packages s3fs rclone
if declare -F need_versitygw >/dev/null; then
	need_versitygw
	VGW=$AIFS_VERSITYGW
else
	VGW="$(go env GOPATH)/bin/versitygw"
	[[ -x $VGW ]] || go install github.com/versity/versitygw/cmd/versitygw@v1.8.0
fi

# Everything S3 here is plain http on 127.0.0.1: a CA bundle from the environment only breaks
# clients (rclone refuses to start: "LoadCustomCABundleError ... unsupported transport").
unset AWS_CA_BUNDLE AWS_PROFILE AWS_SESSION_TOKEN AWS_DEFAULT_REGION
export AWS_ACCESS_KEY_ID=aifsbench AWS_SECRET_ACCESS_KEY=aifsbenchsecret AWS_REGION=us-east-1

VGW_PID=""
BG_PIDS="" # rclone mounts (they end when unmounted; killed here if one did not)
s3_cleanup() {
	# clients first (they hold connections to the server), then the server, then lib.sh's cleanup
	awk -v run="$RUN" 'index($2, run) == 1 && $3 ~ /^fuse/ { print $2 }' /proc/mounts | sort -r |
		while read -r m; do fusermount3 -u "$m" 2>/dev/null || umount -l "$m"; done
	for p in $BG_PIDS; do kill "$p" 2>/dev/null || true; done
	if [[ -n $VGW_PID ]]; then
		kill "$VGW_PID" 2>/dev/null || true
		for _ in $(seq 50); do kill -0 "$VGW_PID" 2>/dev/null || break; sleep 0.1; done
	fi
	cleanup
}
trap s3_cleanup EXIT

out() { echo "$*" | tee -a "$RESULTS"; }
: >"$RESULTS"
out "s3.sh: $(date -u +%Y-%m-%dT%H:%MZ), $(machine), FILES=$FILES JOBS=\"$JOBS\" RUNS=$RUNS DELAY=$DELAY NAMES=$NAMES"

# --- the disk, the server, the data ---------------------------------------------------------------
# Room for the per-file tree, its shard set (twice while versitygw assembles a multipart upload),
# the same set packed on the disk (part 2), the disk caches and the kernel plane's copies, and NAMES inline-data inodes with their shard set and index.
DISK=$RUN/disk ROOT=$RUN/disk/root
truncate -s "$((FILES * 112640 * 8 / 1048576 + NAMES / 200 + 2048))M" "$RUN/disk.img"
mkfs.ext4 -q -F -O inline_data -N $((NAMES + FILES + 100000)) "$RUN/disk.img"
mkdir -p "$DISK"
loopmount "$RUN/disk.img" "$DISK"
mkdir -p "$ROOT/aifs" "$DISK/cache"

PORT=$($PY -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
EP=http://127.0.0.1:$PORT
CUR_EP=$EP # the endpoint the mounts of part 1 use: the server, or the delaying proxy (1b)
export AWS_ENDPOINT_URL=$EP
# --keep-alive: without it versitygw closes the connection after every response (a real S3 keeps
# it open; every client here would pay a TCP handshake per request).
"$VGW" --port "127.0.0.1:$PORT" --access "$AWS_ACCESS_KEY_ID" --secret "$AWS_SECRET_ACCESS_KEY" \
	--quiet --keep-alive posix "$ROOT" >"$RUN/versitygw.log" 2>&1 &
VGW_PID=$!
for _ in $(seq 100); do (exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null && break; sleep 0.1; done
(exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null || die "versitygw did not start: $(cat "$RUN/versitygw.log")"

# rclone's remote "vgw", from the environment only
touch "$RUN/rclone.conf"
export RCLONE_CONFIG=$RUN/rclone.conf RCLONE_CONFIG_VGW_TYPE=s3 RCLONE_CONFIG_VGW_PROVIDER=Other \
	RCLONE_CONFIG_VGW_ACCESS_KEY_ID=$AWS_ACCESS_KEY_ID RCLONE_CONFIG_VGW_SECRET_ACCESS_KEY=$AWS_SECRET_ACCESS_KEY \
	RCLONE_CONFIG_VGW_ENDPOINT=$EP RCLONE_CONFIG_VGW_REGION=us-east-1
echo "$AWS_ACCESS_KEY_ID:$AWS_SECRET_ACCESS_KEY" >"$RUN/s3fs.passwd"
chmod 600 "$RUN/s3fs.passwd"

# The per-file layout: files written into a bucket directory are objects to versitygw's posix
# backend (no xattrs needed; they have no stored ETag and are served without one).
go run ./integration/gendata --files "$FILES" --classes $((FILES / 100 > 0 ? FILES / 100 : 1)) "$ROOT/perfile" >&2
"$AIFS" pack --quiet "$ROOT/perfile" s3://aifs/data
DATA=$(du -sb --apparent-size "$ROOT/perfile" | cut -f1)
n=$(rclone lsf -R --fast-list --files-only vgw:perfile | wc -l)
[[ $n -eq $FILES ]] || die "versitygw lists $n objects in the per-file bucket, want $FILES"

# --- mounting each system ----------------------------------------------------------------------------
mount_rclone() { # BUCKET MNT
	mkdir -p "$2"
	# --no-modtime: without it rclone HEADs every object on open to read its mtime metadata (2
	# requests per file instead of 1, 20% slower here). The VFS cache is off (the default).
	RCLONE_CONFIG_VGW_ENDPOINT=$CUR_EP rclone mount "vgw:$1" "$2" --read-only --no-modtime --vfs-cache-mode off --log-file "$RUN/rclone.log" &
	BG_PIDS="$BG_PIDS $!"
	for _ in $(seq 100); do mountpoint -q "$2" && return 0; sleep 0.1; done
	die "rclone mount of $1 did not come up: $(tail -5 "$RUN/rclone.log")"
}
mount_s3fs() { # BUCKET MNT — defaults: no local data cache (no use_cache), stat cache on
	mkdir -p "$2"
	s3fs "$1" "$2" -o ro,url="$CUR_EP",use_path_request_style,endpoint=us-east-1,passwd_file="$RUN/s3fs.passwd"
	for _ in $(seq 100); do mountpoint -q "$2" && return 0; sleep 0.1; done
	die "s3fs mount of $1 did not come up"
}
# mount_kernel MNT CACHE_DIR [FLAG...] mounts the set on the kernel data plane with CACHE_DIR (the
# copies of the shards) and checks that the plane is the kernel's: -o data=kernel falls back to
# nothing, but the check says which plane a reader would be measuring.
mount_kernel() {
	local mnt=$1 cache=$2
	shift 2
	mkdir -p "$mnt"
	"$AIFS" mount s3://aifs/data "$mnt" "$@" --cache-dir "$cache" --cache-size $((DATA * 2)) -o data=kernel
	[[ $(findmnt -n -o FSTYPE "$mnt") == erofs ]] || die "$mnt: not the kernel plane ($(findmnt -n -o FSTYPE "$mnt"))"
}
unmount() { # MNT: ends its daemon too
	fusermount3 -u "$1"
	for _ in $(seq 100); do mountpoint -q "$1" || return 0; sleep 0.1; done
	die "$1 is still mounted"
}
# stat_of MNT SECTION FIELD prints one figure of an aifs mount's stats (0 if it is missing)
stat_of() {
	"$AIFS" stats --json "$1" | $PY -c 'import json,sys
d=json.load(sys.stdin); sec, f = sys.argv[1], sys.argv[2]
s = d.get(sec) or (d.get("storage") or {}).get(sec) or {}
print(int(s.get(f, 0) or 0))' "$2" "$3"
}
vgw_ticks() { cpu_ticks "$VGW_PID"; }
HZ=$(getconf CLK_TCK)
files_per_s() { $PY -c 'import json,sys; r=json.load(open(sys.argv[1])); print(round(r["passes"][0]["files_per_s"]))' "$1"; }
list_s() { $PY -c 'import json,sys; print("%.1f" % json.load(open(sys.argv[1]))["dirs"][0]["list_seconds"])' "$1"; }
digests() { $PY -c 'import json,sys; print(" ".join(p["digest"] for p in json.load(open(sys.argv[1]))["passes"]))' "$1"; }
DIGEST=""
check_digest() { # JSONFILE SYSTEM: every pass of every system must read the same bytes
	for d in $(digests "$1"); do
		[[ -z $DIGEST ]] && DIGEST=$d
		[[ $d == "$DIGEST" ]] || die "$2 read digest $d, others $DIGEST: not the same bytes"
	done
}

# --- 1. cold shuffled epoch -------------------------------------------------------------------------
# one_cold SYSTEM J RUN TAG: mounts SYSTEM afresh on $CUR_EP, reads one shuffled epoch with every
# cache dropped, unmounts; appends "files/s list_s vgw_cpu_ms s3_requests s3_MB busy%" to
# $RUN/cold$TAG-SYSTEM-J (busy%: the whole machine's, over the bench).
one_cold() {
	local sys=$1 j=$2 r=$3 tag=$4 mnt=$RUN/mnt-$1 t0 t1 b0 i0 b1 i1 req=0 mb=0
	rm -rf "$DISK/cache/cold"
	mkdir -p "$DISK/cache/cold" "$mnt"
	case $sys in
	aifs) "$AIFS" mount s3://aifs/data "$mnt" --s3-endpoint "$CUR_EP" --cache-dir "$DISK/cache/cold" --cache-size $((DATA * 2)) ;;
	aifs-staged) "$AIFS" mount s3://aifs/data "$mnt" --s3-endpoint "$CUR_EP" --cache-dir "$DISK/cache/cold" --cache-size $((DATA * 2)) -o prefetch_shards=on ;;
	aifs-nocache) "$AIFS" mount s3://aifs/data "$mnt" --s3-endpoint "$CUR_EP" ;;
	aifs-kernel) mount_kernel "$mnt" "$DISK/cache/cold" --s3-endpoint "$CUR_EP" ;;
	s3fs) mount_s3fs perfile "$mnt" ;;
	rclone) mount_rclone perfile "$mnt" ;;
	esac
	t0=$(vgw_ticks)
	read -r b0 i0 < <(cpu_busy_idle)
	"$AIFS" bench --json --drop-caches --relist -j "$j" --seed "$r" "$mnt" >"$RUN/bench.json"
	read -r b1 i1 < <(cpu_busy_idle)
	t1=$(vgw_ticks)
	check_digest "$RUN/bench.json" "$sys"
	if [[ $sys == aifs* ]]; then
		req=$(stat_of "$mnt" s3 requests)
		mb=$(($(stat_of "$mnt" s3 bytes) / 1000000))
	fi
	echo "$(files_per_s "$RUN/bench.json") $(list_s "$RUN/bench.json") $(((t1 - t0) * 1000 / HZ)) $req $mb $(busy_percent "$b0" "$i0" "$b1" "$i1")" >>"$RUN/cold$tag-$sys-$j"
	if [[ $sys == aifs-kernel ]]; then
		# the next epoch's mount takes the cache directory's lock, which this daemon holds
		unmount_daemon "$mnt" "$(daemon_pid "$mnt")"
	else
		unmount "$mnt"
	fi
}
COLD_SYSTEMS=${SYSTEMS:-aifs aifs-staged aifs-nocache aifs-kernel s3fs rclone}
col() { awk -v c="$1" '{print $c}' "$2" | median; } # median of column C of a cold-* file
icol() { printf "%.0f" "$(col "$@")"; }                # the same, rounded
label() {
	case $1 in
	aifs) echo "aifs (empty --cache-dir)" ;;
	aifs-staged) echo "aifs, prefetch_shards=on" ;;
	aifs-nocache) echo "aifs, no disk cache" ;;
	aifs-kernel) echo "aifs, kernel plane (empty cache_dir)" ;;
	rclone) echo "rclone mount" ;;
	*) echo "$1" ;;
	esac
}
# cold_part TAG TITLE: RUNS runs of every system at every J, then the tables
cold_part() {
	local tag=$1 title=$2 r j sys head sep target row best v f req mb
	for r in $(seq "$RUNS"); do
		for j in $JOBS; do
			for sys in $COLD_SYSTEMS; do
				one_cold "$sys" "$j" "$r" "$tag"
				echo "cold$tag run $r, $j readers, $sys: $(tail -1 "$RUN/cold$tag-$sys-$j")" >&2
			done
		done
	done
	out ""
	out "$title, $FILES files ($((DATA / 1000000)) MB), fresh mounts, caches dropped; files/s, median of $RUNS runs:"
	out ""
	head="| readers |" sep="|---|"
	for sys in $COLD_SYSTEMS; do head="$head $(label "$sys") |" sep="$sep---|"; done
	for sys in $COLD_SYSTEMS; do
		[[ $sys == aifs* ]] || continue
		target=""
		[[ $sys == aifs ]] && target=" (target ≥ 5)"
		head="$head $sys / better peer$target |" sep="$sep---|"
	done
	out "$head"
	out "$sep"
	for j in $JOBS; do
		row="| $j |" best=0
		for sys in $COLD_SYSTEMS; do
			v=$(icol 1 "$RUN/cold$tag-$sys-$j")
			row="$row $v |"
			[[ $sys == aifs* ]] || best=$((v > best ? v : best))
		done
		for sys in $COLD_SYSTEMS; do
			[[ $sys == aifs* ]] || continue
			if [[ $best -gt 0 ]]; then row="$row **$(ratio "$(icol 1 "$RUN/cold$tag-$sys-$j")" "$best")** |"; else row="$row — |"; fi
		done
		out "$row"
	done
	out ""
	out "Per cold epoch (medians over the runs): listing of the tree by aifs bench after dropping caches, s; versitygw CPU, ms per 1,000 files read; the whole machine's CPU busy over the epoch ($(nproc) cores; near 100% the epoch is bound by CPU, not by latency); S3 requests and MB fetched by aifs (its stats):"
	out ""
	out "| readers | system | listing s | server CPU ms / 1k files | machine busy % | S3 requests | S3 MB (dataset $((DATA / 1000000)) MB) |"
	out "|---|---|---|---|---|---|---|"
	for j in $JOBS; do
		for sys in $COLD_SYSTEMS; do
			f=$RUN/cold$tag-$sys-$j
			req=$(icol 4 "$f") mb=$(icol 5 "$f")
			[[ $sys == aifs* ]] || req="—" mb="—"
			out "| $j | $(label "$sys") | $(col 2 "$f") | $(awk -v c="$(col 3 "$f")" -v n="$FILES" 'BEGIN{printf "%.0f", c*1000/n}') | $(icol 6 "$f") | $req | $mb |"
		done
	done
}
cold_part "" "Cold shuffled epoch over S3"

# --- 1b. the same with a per-request latency --------------------------------------------------------
if [[ -n $DELAY ]]; then
	start_s3delay "$EP" "$DELAY"
	BG_PIDS="$BG_PIDS $S3DELAY_PID"
	CUR_EP=$S3DELAY_EP
	cold_part "-delay" "Cold shuffled epoch over S3 with $DELAY added to every request (the proxy integration/s3delay: a real object store's time to first byte)"
	CUR_EP=$EP
fi

# --- 2. later epochs from the disk cache against the local disk ------------------------------------
# Both mounts keep aifs's memory cache small, so that a later epoch is served by the disk cache
# (and the local backend), not from memory; drop_caches empties the kernel's page cache.
# The kernel plane (WARM_KERNEL) has no memory cache of its own: drop_caches leaves it its copies.
rm -rf "$DISK/cache/warm" "$DISK/cache/warm-kernel"
mkdir -p "$DISK/cache/warm" "$RUN/mnt-cached" "$RUN/mnt-local"
"$AIFS" mount s3://aifs/data "$RUN/mnt-cached" --cache-dir "$DISK/cache/warm" --cache-size $((DATA * 2)) -o mem_cache=64M
# The same tree packed on the disk: the objects versitygw keeps are files too, but their mtimes
# are the uploads', not those the index records, and the local backend refuses them.
"$AIFS" pack --quiet "$ROOT/perfile" "$DISK/localset"
"$AIFS" mount "$DISK/localset" "$RUN/mnt-local" -o mem_cache=64M # the same samples, from the disk
WARM_DIRS=("$RUN/mnt-cached" "$RUN/mnt-local")
if [[ -n $WARM_KERNEL ]]; then
	mkdir -p "$DISK/cache/warm-kernel"
	mount_kernel "$RUN/mnt-kernel" "$DISK/cache/warm-kernel"
	KERNEL_PID=$(daemon_pid "$RUN/mnt-kernel")
	WARM_DIRS+=("$RUN/mnt-kernel")
	KERNEL_ROWS=()
fi
out ""
out "Later shuffled epochs (caches dropped before each): aifs over S3 from its disk cache, filled by one cold epoch, against aifs mounting the same tree packed on the local disk; files/s, median of $RUNS epochs:"
out ""
out "| readers | first epoch over S3 (fills the cache) | later epochs from the disk cache | local disk backend | cache / local (target ≥ 0.8) | S3 bytes fetched in the later epochs | disk cache hits / misses in them |"
out "|---|---|---|---|---|---|---|"
first=1
for j in $JOBS; do
	fill="—" kfill="—"
	if [[ $first -eq 1 ]]; then
		"$AIFS" bench --json --drop-caches --relist -j "$j" "$RUN/mnt-cached" >"$RUN/bench.json"
		check_digest "$RUN/bench.json" "aifs (filling the disk cache)"
		fill=$(files_per_s "$RUN/bench.json")
		if [[ -n $WARM_KERNEL ]]; then
			"$AIFS" bench --json --drop-caches --relist -j "$j" "$RUN/mnt-kernel" >"$RUN/bench.json"
			check_digest "$RUN/bench.json" "aifs, kernel plane (filling its copies)"
			kfill=$(files_per_s "$RUN/bench.json")
		fi
		first=0
	fi
	b0=$(stat_of "$RUN/mnt-cached" s3 bytes) h0=$(stat_of "$RUN/mnt-cached" disk_cache hits) m0=$(stat_of "$RUN/mnt-cached" disk_cache misses)
	if [[ -n $WARM_KERNEL ]]; then
		kb0=$(stat_of "$RUN/mnt-kernel" s3 bytes) ke0=$(stat_of "$RUN/mnt-kernel" kernel_fill events) kw0=$(stat_of "$RUN/mnt-kernel" kernel_fill waited)
		kc0=$(cpu_ticks "$KERNEL_PID")
	fi
	"$AIFS" bench --json --drop-caches --epochs "$RUNS" --seed 7 -j "$j" "${WARM_DIRS[@]}" >"$RUN/bench.json"
	check_digest "$RUN/bench.json" "aifs (disk cache / local / kernel plane)"
	b1=$(stat_of "$RUN/mnt-cached" s3 bytes) h1=$(stat_of "$RUN/mnt-cached" disk_cache hits) m1=$(stat_of "$RUN/mnt-cached" disk_cache misses)
	read -r c l k < <(bench_medians "$RUN/bench.json")
	out "| $j | $fill | $c | $l | **$(ratio "$c" "$l")** | $((b1 - b0)) | $((h1 - h0)) / $((m1 - m0)) |"
	if [[ -n $WARM_KERNEL ]]; then
		kc1=$(cpu_ticks "$KERNEL_PID")
		kb1=$(stat_of "$RUN/mnt-kernel" s3 bytes) ke1=$(stat_of "$RUN/mnt-kernel" kernel_fill events) kw1=$(stat_of "$RUN/mnt-kernel" kernel_fill waited)
		KERNEL_ROWS+=("| $j | $kfill | $k | $c | $l | **$(ratio "$k" "$l")** | **$(ratio "$k" "$c")** | $((kb1 - kb0)) | $((ke1 - ke0)) / $((kw1 - kw0)) | $(awk -v t=$((kc1 - kc0)) -v hz="$HZ" -v n=$((FILES * RUNS)) 'BEGIN{printf "%.1f", t / hz * 1e6 / n}') |")
	fi
done
unmount "$RUN/mnt-cached"
unmount "$RUN/mnt-local"
if [[ -n $WARM_KERNEL ]]; then
	unmount_daemon "$RUN/mnt-kernel" "$KERNEL_PID"
	out ""
	out "The kernel data plane in the same epochs (the same aifs bench reads the three mounts in turn): aifs -o data=kernel over S3 from its copies in the cache directory, filled by one cold epoch of its own; files/s, median of $RUNS epochs; S3 bytes fetched, fanotify pre-content events and those that waited for a fill from S3, and its daemon's CPU µs a sample, over the later epochs:"
	out ""
	out "| readers | first epoch over S3 (fills the copies) | later epochs from the copies | FUSE from its disk cache | local disk backend | kernel / local | kernel / FUSE cache | S3 bytes fetched in the later epochs | events / waited in them | daemon CPU µs / sample |"
	out "|---|---|---|---|---|---|---|---|---|---|"
	for row in "${KERNEL_ROWS[@]}"; do out "$row"; done
fi

# --- 3. mount-to-ImageFolder against listing the per-file layout ------------------------------------
[[ $NAMES -gt 0 ]] || exit 0
go run ./integration/gendata --files "$NAMES" --classes 1000 --mean-size 40 --sigma 0.3 "$ROOT/names" >&2
"$AIFS" pack --quiet "$ROOT/names" s3://aifs/names
now() { date +%s.%N; }
for r in $(seq "$RUNS"); do
	dropcaches
	mkdir -p "$RUN/mnt-names"
	t0=$(now)
	"$AIFS" mount s3://aifs/names "$RUN/mnt-names"
	t1=$(now)
	s=$($PY integration/bench/imagefolder.py --cold "$NAMES" 1 "$RUN/mnt-names" | cut -d' ' -f1) # checks the count
	echo "$(awk -v a="$t0" -v b="$t1" 'BEGIN{printf "%.2f", b-a}') $s" >>"$RUN/names-aifs"
	unmount "$RUN/mnt-names"
	dropcaches
	t0=$(now)
	n=$(rclone lsf -R --fast-list --files-only vgw:names | wc -l)
	t1=$(now)
	[[ $n -eq $NAMES ]] || die "rclone lsf listed $n objects, want $NAMES"
	awk -v a="$t0" -v b="$t1" 'BEGIN{printf "%.2f\n", b-a}' >>"$RUN/names-lsf"
	echo "names run $r: aifs mount, ImageFolder $(tail -1 "$RUN/names-aifs") s; rclone lsf $(tail -1 "$RUN/names-lsf") s" >&2
done
for r in $(seq "$NAMES_MOUNT_RUNS"); do
	dropcaches
	mount_rclone names "$RUN/mnt-names-rclone"
	$PY integration/bench/imagefolder.py --cold "$NAMES" 1 "$RUN/mnt-names-rclone" | cut -d' ' -f1 >>"$RUN/names-rclone-mount"
	unmount "$RUN/mnt-names-rclone"
done
mount_s=$(col 1 "$RUN/names-aifs") scan_s=$(col 2 "$RUN/names-aifs")
total=$(awk '{print $1+$2}' "$RUN/names-aifs" | median)
lsf=$(median <"$RUN/names-lsf")
idx=$(stat -c %s "$ROOT/aifs/names/index.aifs")
out ""
out "$NAMES names in 1,000 classes, caches dropped, median of $RUNS runs (index object $((idx / 1000000)) MB):"
out ""
out "| | seconds |"
out "|---|---|"
out "| \`aifs mount s3://…\` (returns when live: index GET, shard HEADs) | $mount_s |"
out "| ImageFolder over the aifs mount | $scan_s |"
out "| **mount to ImageFolder ready** | **$total** |"
out "| \`rclone lsf -R --fast-list\` of the per-file bucket (listing only) | $lsf |"
if [[ -s $RUN/names-rclone-mount ]]; then
	out "| ImageFolder over \`rclone mount\` of the per-file bucket (median of $NAMES_MOUNT_RUNS) | $(median <"$RUN/names-rclone-mount") |"
fi
out ""
out "Per-file listing / aifs mount-to-ImageFolder: **$(ratio "$lsf" "$total")×**"
out ""
out "(results also in $RESULTS)"
