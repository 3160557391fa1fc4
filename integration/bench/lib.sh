# lib.sh — shared by the scripts in integration/bench (source it; needs root). It builds aifs,
# makes a run directory under WORKDIR and removes everything the script set up on exit, even
# when interrupted: aifs mounts under the run directory, loop mounts, loop devices, cgroups.
#
# The sourcing script sets NAME (for messages and the run directory) and WORKDIR.

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
PY=/usr/bin/python3

die() { echo "$NAME: $*" >&2; exit 1; }
[[ $(id -u) -eq 0 ]] || die "needs root (loop devices, mounts, drop_caches, cgroups)"
cd "$REPO"
. scripts/setup.sh
need_packages fuse3 fio e2fsprogs python3-torch python3-torchvision python3-pil
build_aifs
AIFS=$REPO/bin/aifs

RUN=$(mktemp -d "$WORKDIR/aifs-$NAME.XXXXXX")
LOOPS=""
CGROUPS=""
cleanup() {
	# aifs mounts first (they live on the loop mounts), deepest first
	awk -v run="$RUN" 'index($2, run) == 1 && $3 ~ /^fuse/ { print $2 }' /proc/mounts | sort -r |
		while read -r m; do fusermount3 -u "$m" 2>/dev/null || umount -l "$m"; done
	awk -v run="$RUN" 'index($2, run) == 1 { print $2 }' /proc/mounts | sort -r |
		while read -r m; do umount "$m" 2>/dev/null || umount -l "$m"; done
	for d in $LOOPS; do losetup -d "$d" 2>/dev/null; done
	for c in $CGROUPS; do # empty once the daemons in it have exited
		for _ in $(seq 50); do [[ -d $c ]] || break; rmdir "$c" 2>/dev/null && break; sleep 0.1; done
	done
	rm -rf -- "$RUN"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# machine prints the machine line for the report.
machine() {
	echo "$(nproc) cores ($(awk -F': ' '/model name/ {print $2; exit}' /proc/cpuinfo)), $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo), Linux $(uname -r), disk $(df --output=source "$WORKDIR" | tail -1) ($(lsblk -dno ROTA "$(df --output=source "$WORKDIR" | tail -1)" 2>/dev/null | tr -d " " | sed 's/1/rotational/;s/0/SSD/'))"
}

# loopmount IMAGE DIR mounts IMAGE at DIR through a loop device that reads its backing file
# with direct I/O, so the image is not cached a second time by the host filesystem.
loopmount() {
	local dev
	dev=$(losetup --direct-io=on -f --show "$1")
	LOOPS="$LOOPS $dev"
	mount "$dev" "$2"
}

# ext4_dataset FILES DIR makes an ext4 image in the run directory, mounts it at DIR, writes an
# ImageNet-like tree of FILES files (log-normal sizes, mean ~110 KB) to DIR/tree and packs it
# into the shard set DIR/set on the same file system.
ext4_dataset() {
	local files=$1 dir=$2
	truncate -s "$((files * 112640 * 5 / 2 / 1048576 + 512))M" "$RUN/$(basename "$dir").img"
	mkfs.ext4 -q -F "$RUN/$(basename "$dir").img"
	mkdir -p "$dir"
	loopmount "$RUN/$(basename "$dir").img" "$dir"
	go run ./integration/gendata --files "$files" --classes $((files / 100 > 0 ? files / 100 : 1)) "$dir/tree" >&2
	"$AIFS" pack --quiet "$dir/tree" "$dir/set"
}

# in_cgroup BYTES CMD... runs CMD in a fresh memory cgroup (v2 or v1) limited to BYTES; what
# CMD starts (an aifs daemon) stays in it until the script ends.
in_cgroup() {
	local limit=$1 cg
	shift
	if [[ -f /sys/fs/cgroup/cgroup.controllers ]]; then
		cg=$(mktemp -d /sys/fs/cgroup/aifs-bench.XXXXXX)
		echo "$limit" >"$cg/memory.max"
	else
		cg=$(mktemp -d /sys/fs/cgroup/memory/aifs-bench.XXXXXX)
		echo "$limit" >"$cg/memory.limit_in_bytes"
	fi
	CGROUPS="$cg $CGROUPS"
	bash -c 'echo $$ >"$0/cgroup.procs" && exec "$@"' "$cg" "$@"
}

dropcaches() { sync; echo 3 >/proc/sys/vm/drop_caches; }
daemon_pid() { pgrep -f -- "aifs mount .*$1( |$)" | head -1; }
cpu_ticks() { awk '{print $14+$15}' "/proc/$1/stat"; }
median() { sort -n | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN{printf "%.2f", a/b}'; }
# bench_medians JSONFILE prints the median files/s of each DIR of an 'aifs bench --json' run.
bench_medians() { $PY -c 'import json,sys; print(" ".join(str(round(d["median_files_per_s"])) for d in json.load(open(sys.argv[1]))["dirs"]))' "$1"; }
