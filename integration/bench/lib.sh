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
FUSE_MODE="" # /dev/fuse's mode before fuse_for_users, restored on exit
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
	[[ -z $FUSE_MODE ]] || chmod "$FUSE_MODE" /dev/fuse
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# For the scripts that keep every pass of a figure in RES/FIGURE, a value a line (the sourcing
# script sets RES): meta KEY VALUE records the run's description in RES/meta; secs MICROSECONDS
# prints them as seconds; timed FIGURE CMD... runs CMD and appends its wall-clock seconds to
# FIGURE; unmount_aifs MNT unmounts the aifs mount at MNT, either data plane (the kernel plane can
# be busy for a moment while its daemon handles reads: docs/kernel.md; any other FUSE mount, such
# as squashfuse's, too); unmount_daemon MNT PID unmounts it and waits for its daemon PID to exit,
# so that the next mount's daemon is the only one daemon_pid finds.
meta() { printf '%s\t%s\n' "$1" "$2" >>"$RES/meta"; }
secs() { printf '%d.%06d\n' $(($1 / 1000000)) $(($1 % 1000000)); }
timed() {
	local figure=$1 t0=${EPOCHREALTIME/[.,]/}
	shift
	"$@"
	secs $((${EPOCHREALTIME/[.,]/} - t0)) >>"$RES/$figure"
}
# cpu_rss CPU RSS CMD... runs CMD under GNU time and appends the CPU seconds (user + system) of CMD
# and of the children it waited for to RES/CPU, and its peak RSS (KiB; the largest of them, for
# xargs) to RES/RSS; rss_kib PID prints a process's RSS in KiB; listing DIR N lists DIR as
# `find DIR | wc -l` does and fails unless it counts N entries.
cpu_rss() {
	local cpu=$1 rss=$2 user sys peak
	shift 2
	/usr/bin/time -o "$RUN/usage" -f '%U %S %M' "$@"
	read -r user sys peak <"$RUN/usage"
	echo "$user $sys" | awk '{print $1 + $2}' >>"$RES/$cpu"
	echo "$peak" >>"$RES/$rss"
}
rss_kib() { awk '/^VmRSS:/ {print $2}' "/proc/$1/status"; }
listing() {
	local n
	n=$(find "$1" | wc -l)
	[[ $n -eq $2 ]] || die "find $1 listed $n entries, not $2"
}
unmount_aifs() {
	if [[ $(findmnt -n -o FSTYPE "$1") == erofs ]]; then # the kernel data plane (-o data=kernel)
		for _ in $(seq 50); do umount "$1" 2>/dev/null && return 0; sleep 0.1; done
		umount -l "$1"
	else
		fusermount3 -u "$1"
	fi
}
unmount_daemon() {
	unmount_aifs "$1"
	for _ in $(seq 300); do kill -0 "$2" 2>/dev/null || return 0; sleep 0.1; done
	die "the daemon of $1 (pid $2) did not exit within 30 s of its unmount"
}

# commit_desc OUT prints the commit the run measures, and the files that differ from it, each
# with the start of its sha256, but for the report in OUT that the run replaces (an OUT outside
# the checkout is no pathspec git takes).
commit_desc() {
	local dirty
	dirty=$({ git status --porcelain --untracked-files=all -- . ":(exclude)$1" 2>/dev/null ||
		git status --porcelain --untracked-files=all; } | awk '{print $2}' |
		while read -r f; do echo "$f (sha256 $(sha256sum "$f" | cut -c1-12))"; done | paste -sd' ')
	echo "$(git rev-parse --short HEAD 2>/dev/null)${dirty:+ with uncommitted $dirty}"
}

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

# fs_image TYPE MIB DIR [MKFS-OPTION...] makes a TYPE (ext4 or xfs) file system image of MIB
# MiB in the run directory and mounts it at DIR.
fs_image() {
	local type=$1 mib=$2 dir=$3 img
	shift 3
	img="$RUN/$(basename "$dir").img"
	truncate -s "${mib}M" "$img"
	case $type in
	ext4) mkfs.ext4 -q -F "$@" "$img" ;;
	xfs) mkfs.xfs -q -f "$@" "$img" ;;
	*) die "fs_image: unknown file system type $type" ;;
	esac
	mkdir -p "$dir"
	loopmount "$img" "$dir"
}

# ext4_dataset FILES DIR [GENDATA-FLAG...] makes an ext4 image in the run directory, mounts it at
# DIR, writes an ImageNet-like tree of FILES files (log-normal sizes, mean ~110 KB; real JPEGs
# with --jpeg) to DIR/tree and packs it into the shard set DIR/set on the same file system.
ext4_dataset() {
	local files=$1 dir=$2
	shift 2
	fs_image ext4 "$((files * 112640 * 5 / 2 / 1048576 + 512))" "$dir"
	go run ./integration/gendata "$@" --files "$files" --classes $((files / 100 > 0 ? files / 100 : 1)) "$dir/tree" >&2
	"$AIFS" pack --quiet "$dir/tree" "$dir/set"
}

# as_nobody CMD... runs CMD as the user nobody. A FUSE mount that nobody makes lets only nobody
# in (no allow_other), so its readers run this way too.
as_nobody() { setpriv --reuid=65534 --regid=65534 --clear-groups "$@"; }

# fuse_for_users lets users other than root open /dev/fuse (mode 666, as Debian ships it; some
# machines keep it to root) until the script exits, which restores its mode, and lets them into
# the run directory.
fuse_for_users() {
	[[ -n $FUSE_MODE ]] || FUSE_MODE=$(stat -c %a /dev/fuse)
	chmod 666 /dev/fuse
	chmod 755 "$RUN"
}

# new_cgroup BYTES makes a fresh memory cgroup (v2 or v1) limited to BYTES and sets CG to its
# path; the script's exit removes it. Run commands in it with in_cg.
new_cgroup() {
	if [[ -f /sys/fs/cgroup/cgroup.controllers ]]; then
		CG=$(mktemp -d /sys/fs/cgroup/aifs-bench.XXXXXX)
		echo "$1" >"$CG/memory.max"
	else
		CG=$(mktemp -d /sys/fs/cgroup/memory/aifs-bench.XXXXXX)
		echo "$1" >"$CG/memory.limit_in_bytes"
	fi
	CGROUPS="$CG $CGROUPS"
}

# in_cg CGROUP CMD... runs CMD in CGROUP; what CMD starts (a FUSE daemon) stays in it.
in_cg() { bash -c 'echo $$ >"$0/cgroup.procs" && exec "$@"' "$@"; }

# in_cgroup BYTES CMD... runs CMD in a fresh memory cgroup limited to BYTES.
in_cgroup() {
	new_cgroup "$1"
	shift
	in_cg "$CG" "$@"
}

dropcaches() { sync; echo 3 >/proc/sys/vm/drop_caches; }
# fio_block BYTES FILES prints the mean sample size rounded up to 4 KiB: the block of fio's
# O_DIRECT random reads that stand for one sample (O_DIRECT reads whole blocks).
fio_block() { echo $((($1 / $2 + 4095) / 4096 * 4096)); }
# fio_json FILE RW BS JOBS [FIO-FLAG...] drops the caches and prints fio's JSON report of one run
# of O_DIRECT reads of FILE (libaio unless a flag names another engine; the caller gives the
# depth, --iodepth=1 being one read in flight per job, as each reader has, and the length).
fio_json() {
	dropcaches
	fio_direct "$@"
}
# fio_direct FILE RW BS JOBS [FIO-FLAG...] is fio_json with the page cache left as it is (O_DIRECT
# reads do not go through it).
fio_direct() {
	local file=$1 rw=$2 bs=$3 j=$4
	shift 4
	# --readonly: fio lays out (writes) a file shorter than the range it is given; the file is
	# a shard of the set being measured, so fio must fail rather than write it.
	fio --name=ceiling --filename="$file" --rw="$rw" --bs="$bs" --numjobs="$j" --readonly \
		--direct=1 --ioengine=libaio --group_reporting --output-format=json "$@"
}
# fio_run FILE RW BS JOBS [FIO-FLAG...] prints the reads/s (RW randread) or MB/s (RW read) of
# fio_json's run.
fio_run() {
	fio_json "$@" | $PY -c 'import json,sys; r=json.load(sys.stdin)["jobs"][0]["read"]; print(round(r["iops"]) if sys.argv[1]=="randread" else round(r["bw_bytes"]/1e6))' "$2"
}
# fio_cpu_per_read FILE BS JOBS prints the CPU time (user+system, µs) fio's threads spend per
# O_DIRECT random read of BS bytes with pread (psync, one in flight per job, 3 seconds): what the
# disk read alone costs a program that makes it the way aifs does.
fio_cpu_per_read() {
	fio_json "$1" randread "$2" "$3" --ioengine=psync --iodepth=1 --time_based --runtime=3 |
		$PY -c 'import json,sys; j=json.load(sys.stdin)["jobs"][0]; print(round((j["usr_cpu"]+j["sys_cpu"])/100*j["job_runtime"]*1000/j["read"]["total_ios"]))'
}
# fio_busy_per_read FILE BS JOBS prints the whole machine's busy CPU time (cpu_busy_idle: every
# process and the kernel, the loop device's worker and the interrupts included) per O_DIRECT random
# read of BS bytes of FILE by JOBS fio jobs with pread (psync, one in flight each, 3 seconds), in
# µs, the page cache left as it is: what a sample read from the disk costs the CPUs where fio makes
# the read. (fio_cpu_per_read counts fio's own threads only.)
fio_busy_per_read() {
	local b0 b1 out
	read -r b0 _ < <(cpu_busy_idle)
	out=$(fio_direct "$1" randread "$2" "$3" --ioengine=psync --iodepth=1 --time_based --runtime=3)
	read -r b1 _ < <(cpu_busy_idle)
	$PY -c 'import json,sys; n=json.loads(sys.argv[1])["jobs"][0]["read"]["total_ios"]; print(round((int(sys.argv[2]) / int(sys.argv[3])) * 1e6 / n, 1))' \
		"$out" "$((b1 - b0))" "$(getconf CLK_TCK)"
}
# fio_once RW BS JOBS prints the reads/s (randread) or MB/s (read) of fio's O_DIRECT reads of the
# first shard of the set in $RUN/ext4/set (1 GiB at most), caches dropped first. Random reads
# run for 3 seconds and keep one read in flight per job, as each reader does. Sequential reads
# keep 8 in flight (32 MiB of 4 MiB reads, the window aifs's read-ahead grows to: one at a time
# measured 801 to 1,603 MB/s across three runs, well below what the device streams) and read the
# shard once, as a sorted scan does, three times over; the median of the three is the figure (one
# read of it measured 1,479-2,143 MB/s in six in a row, 3 seconds' reads 945-2,247; aifs's scans
# in one harness run, 848-1,016 MB/s).
fio_once() {
	if [[ $1 == randread ]]; then
		fio_run "$RUN/ext4/set/shard-000000.dat" "$@" --iodepth=1 --time_based --runtime=3
	else
		for _ in 1 2 3; do fio_run "$RUN/ext4/set/shard-000000.dat" "$@" --iodepth=8 || return 1; done | median
	fi
}
# fio_seq_parts JOBS prints the MB/s of JOBS fio jobs reading the first shard of the set in
# $RUN/ext4/set (1 GiB at most) once, sequentially with O_DIRECT, each job its own part of it
# (--offset_increment: no two read the same bytes) in 4 MiB blocks (smaller if a part is),
# one read in flight each, caches dropped first: the device's bound for JOBS readers that read
# each byte of the shards once in large reads.
fio_seq_parts() {
	local file=$RUN/ext4/set/shard-000000.dat size part bs
	size=$(stat -c %s "$file")
	size=$((size < 1 << 30 ? size : 1 << 30))
	part=$((size / $1 / 4096 * 4096))
	[[ $part -gt 0 ]] || die "fio_seq_parts: the first shard has less than 4 KiB for each of $1 jobs"
	bs=$((part < 4 << 20 ? part : 4 << 20))
	part=$((part / bs * bs))
	fio_run "$file" read "$bs" "$1" --iodepth=1 --size="$part" --offset_increment="$part"
}
# stats_file MNT prints the stats file of the aifs mount at MNT: MNT/.aifs/stats on the FUSE
# plane, the control mount's on the kernel plane (/run/aifs/MAJOR:MINOR, docs/kernel.md).
stats_file() {
	if [[ -e $1/.aifs/stats ]]; then echo "$1/.aifs/stats"; else echo "/run/aifs/$(stat -c '%Hd:%Ld' "$1")/.aifs/stats"; fi
}
# daemon_pid ARG prints the pid of the aifs daemon serving the mount whose command line names
# ARG (its source or mountpoint): under a keeper (-o restart=on, the default for root), the
# keeper's child, whose parent has the same command line; else the one process.
daemon_pid() {
	local pids p
	pids=$(pgrep -f -- "aifs mount .*$1( |$)") || return 0
	for p in $pids; do
		if grep -qx -- "$(awk '{print $4}' "/proc/$p/stat" 2>/dev/null)" <<<"$pids"; then
			echo "$p"
			return
		fi
	done
	head -1 <<<"$pids"
}
cpu_ticks() { awk '{print $14+$15}' "/proc/$1/stat"; }
# cpu_busy_idle prints the whole machine's busy and idle clock ticks since boot (/proc/stat: user,
# nice, system, irq, softirq; idle, iowait); busy_percent B0 I0 B1 I1 prints the busy share
# between two such readings.
cpu_busy_idle() { awk '/^cpu /{print $2+$3+$4+$7+$8, $5+$6}' /proc/stat; }
busy_percent() { awk -v b="$(($3 - $1))" -v i="$(($4 - $2))" 'BEGIN{printf "%.0f", (b + i > 0 ? 100 * b / (b + i) : 0)}'; }
median() { sort -n | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN{printf "%.2f", a/b}'; }
# bench_medians JSONFILE prints the median files/s of each DIR of an 'aifs bench --json' run.
bench_medians() { $PY -c 'import json,sys; print(" ".join(str(round(d["median_files_per_s"])) for d in json.load(open(sys.argv[1]))["dirs"]))' "$1"; }
# start_s3delay TARGET DELAY starts the proxy integration/s3delay in front of the S3 endpoint
# TARGET, adding DELAY to every request, and sets S3DELAY_EP to its endpoint and S3DELAY_PID to
# its pid (the caller stops it).
start_s3delay() {
	go build -o "$RUN/s3delay" ./integration/s3delay
	"$RUN/s3delay" --target "$1" --delay "$2" >"$RUN/s3delay.out" 2>"$RUN/s3delay.log" &
	S3DELAY_PID=$!
	for _ in $(seq 100); do [[ -s $RUN/s3delay.out ]] && break; sleep 0.1; done
	S3DELAY_EP=$(head -1 "$RUN/s3delay.out")
	[[ $S3DELAY_EP == http://* ]] || die "s3delay did not start: $(cat "$RUN/s3delay.log")"
}
