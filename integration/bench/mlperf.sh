#!/usr/bin/env bash
# mlperf.sh — an MLPerf-Storage-style benchmark (OPEN shape, cgroup-scaled; not a submission):
# DLIO's PyTorch training loop (integration/bench/mlperf.py) over ext4, XFS and aifs, side by side
# in one run on one disk. MLPerf Storage's figure is the largest number of simulated accelerators
# (N processes, each its own DataLoader, sleeping the accelerator's step time after each batch,
# then a barrier) kept at accelerator utilisation AU ≥ the floor, with a dataset that the client's
# memory cannot cache. It
#   1. writes each workload's tree on an ext4 image (mlperf.py gen), copies it to an XFS image
#      (both loop-mounted image files on one disk, their loop devices reading with direct I/O, as
#      compare.sh does) and packs it into an aifs shard set on the ext4 image;
#   2. for each N in NS, each system in SYSTEMS in turn (the first moving by one each N, so that
#      the disk's drift over minutes falls on all alike), runs WARMUP + EPOCHS epochs of N
#      simulated accelerators (mlperf.py run): in a fresh memory cgroup holding the readers and,
#      for aifs, the daemon (mounted anew in it), caches dropped first. The cgroup's limit is the
#      dataset's bytes / 5 plus what the processes hold themselves, PROC_MB + N × RANK_MB (their
#      anonymous memory and mapped files: Python, torch's libraries, the daemon's buffers), so that
#      the page cache has at most 1/5 of the dataset (the 5× rule). The defaults err low: the
#      first full run measured 206-277 MiB of them at N = 1 and 340-384 MiB at N = 2 (with
#      PROC_MB 120, N = 1 left the page cache 1/4.5 of the dataset), so the page cache gets
#      less than 1/5, not more. Each run records the largest anonymous + mapped
#      bytes of the cgroup at the end of an epoch (memory.stat), and the report gives the
#      dataset over what the limit left the page cache. A system whose AU was below the floor
#      at STOP N in a row is not run at larger N (one run below it can be the noise of a shared
#      machine: ext4 measured 0.89 at N = 2 while XFS measured 0.94 at N = 3 in one run). Then,
#      at NOCOMPUTE_N accelerators, one run of each system with no step time: the storage's
#      ceiling. After each N's runs, fio's O_DIRECT random reads of the sample's size (rounded
#      up to 4 KiB) on the ext4 shard set, N × THREADS jobs, one read in flight each, the
#      readers' depth (lib.sh's fio_run): the device's bound;
#      for each aifs run, the daemon's CPU (/proc/PID/stat utime + stime) and the FUSE requests it
#      answered (its .aifs/stats), per sample read, warm-up included, and the digest of its stats
#      at the run's end (mlperf.py stats_digest: shard reads, read-ahead, plan read-ahead, the
#      page cache's budget) and its major faults; for every run, the CPU (user, system) and the
#      minor and major faults of the ranks and of their DataLoader workers, each measured epoch;
#   3. writes OUT/mlperf.md (integration/bench/mlperf_report.py: for each workload and system the
#      largest N at the floor, samples/s there, the ceiling, ratios to ext4, requests and daemon
#      CPU a sample; for each plane run with both samplers, aifs_plan's against torch's at each N:
#      issue 46's case that a plan is never slower), OUT/mlperf.tsv (a row per run), OUT/mlperf.png (AU against N) and
#      OUT/mlperf.jsonl (every run's epochs, the report's input: `mlperf_report.py
#      OUT/mlperf.jsonl OUT` writes the report again).
#
# Workloads, MLPerf Storage's shapes scaled to a 2-core machine:
#   resnet50   ImageFolder-like folders of files of 114,660 bytes, read raw; MLPerf's batch 400
#              and step time (ACCEL a100: 0.435 s, h100: 0.224 s) both divided by SCALE (the
#              accelerator's samples/s unchanged, SCALE× the steps an epoch); 8 read threads
#              become THREADS; AU floor 0.90.
#   retinanet  JPEGs of 322,957 bytes (noise images padded to the record), decoded with PIL as
#              DLIO does; batch 24, step 0.04755 s, unscaled; THREADS read threads; floor 0.85.
# SYSTEMS entries are SYSTEM or SYSTEM:SAMPLER. SYSTEM: ext4, xfs (the tree on that image), aifs
# (the ext4 image's shard set mounted by aifs), aifs-kernel (the same mounted with
# -o data=kernel: the kernel data plane, docs/kernel.md), ext4-mem (the ext4 tree with room in the
# cgroup for all of it, read into memory by the warm-up epoch: the loader's own ceiling on this
# machine, more than any storage can feed it; needs WARMUP > 0). With aifs (the FUSE plane) in
# SYSTEMS, after each workload's no-compute runs, `mlperf.py roundtrip` measures the machine's CPU
# a FUSE round trip costs (warm files read whole on ext4 and through the FUSE plane): the report
# bounds the FUSE plane by the kernel plane's busy CPU a sample (ext4's without aifs-kernel in
# SYSTEMS) plus its requests a sample at that cost. SAMPLER: dlio (DLIO's index
# map, the default), torch (torch.utils.data.DistributedSampler), plan
# (aifs_plan.DistributedSampler, all ranks one node).
#
# Needs root (loop devices, mounts, drop_caches, cgroups). Commits nothing. With the defaults
# about 30 minutes on 2 cores. SMOKE=1 is the tiny run scripts/test.sh makes (about a
# minute): 300 and 150 files, N = 1 2, ext4, aifs:torch and aifs:plan, one epoch after the warm-up, the
# report written to a temporary folder; it fails if any run fails or is missing from the report.
#
# Environment (defaults in brackets; SMOKE=1's in braces):
#   WORKLOADS ["resnet50 retinanet"]  SYSTEMS ["ext4 xfs aifs aifs:torch aifs:plan"] {"ext4 aifs:torch aifs:plan"}
#   RESNET50_FILES [12000] {300}  RETINANET_FILES [4000] {150}  NS ["1 2 3 4 6 8"] {"1 2"}
#   NOCOMPUTE_N [4] {2}  EPOCHS [5] {1} (measured, after WARMUP [1])  ACCEL [a100]  SCALE [8]
#   THREADS [2]  PROC_MB [80] {400: a tiny dataset leaves no slack}  RANK_MB [115]
#   STOP [2] {0: never}  FIO_S [3] {1} (seconds a fio run)
#   PASSES [1] (each N's runs, and the no-compute runs, made PASSES times, the order of the
#   systems moving by one each pass; the report takes the median over the passes and shows each
#   pass's ratio of aifs's sampler to torch's)
#   FIXED_MALLOC [0] (1: the readers run with glibc's mmap and trim thresholds fixed, 4 and 32
#   MiB, so that no run's figures depend on the heap its ranks happen to leave their workers)
#   PERF [0] (Hz: with PERF > 0 each run's processes are sampled by `perf record -g` at that rate,
#   into OUT/mlperf-perf/)
#   PPROF [0] (seconds: with PPROF > 0 each aifs daemon serves --metrics-addr and a CPU profile of
#   its first PPROF seconds of each no-compute run is written to OUT/mlperf-pprof/)
#   WORKDIR [/var/tmp]  OUT [docs/bench] {the run directory}
set -euo pipefail

SMOKE=${SMOKE:-0}
if [[ $SMOKE == 1 ]]; then
	: "${SYSTEMS:=ext4 aifs:torch aifs:plan}" "${RESNET50_FILES:=300}" "${RETINANET_FILES:=150}" "${NS:=1 2}"
	: "${NOCOMPUTE_N:=2}" "${EPOCHS:=1}" "${FIO_S:=1}" "${STOP:=0}" "${PROC_MB:=400}"
fi
WORKLOADS=${WORKLOADS:-resnet50 retinanet}
SYSTEMS=${SYSTEMS:-ext4 xfs aifs aifs:torch aifs:plan}
RESNET50_FILES=${RESNET50_FILES:-12000}
RETINANET_FILES=${RETINANET_FILES:-4000}
NS=${NS:-1 2 3 4 6 8}
NOCOMPUTE_N=${NOCOMPUTE_N:-4}
EPOCHS=${EPOCHS:-5}
WARMUP=${WARMUP:-1}
ACCEL=${ACCEL:-a100}
SCALE=${SCALE:-8}
THREADS=${THREADS:-2}
PROC_MB=${PROC_MB:-80}
RANK_MB=${RANK_MB:-115}
STOP=${STOP:-2}
FIO_S=${FIO_S:-3}
PASSES=${PASSES:-1}
PERF=${PERF:-0}
FIXED_MALLOC=${FIXED_MALLOC:-0}
# FIXED_MALLOC=1: the readers' glibc keeps its mmap threshold at 4 MiB and gives the heap's top
# back only past 32 MiB (setting them turns glibc's dynamic thresholds off), so that a sample's
# buffers stay in the heap whatever heap the ranks leave their workers (docs/bench/mlperf.md,
# "Findings": with the dynamic thresholds, RetinaNet's workers of some runs trim and refault
# ~2 MB a sample, 10% of the CPU, by the luck of that heap).
MALLOC_ENV=()
case $FIXED_MALLOC in
0) ;;
1) MALLOC_ENV=(MALLOC_MMAP_THRESHOLD_=$((4 << 20)) MALLOC_TRIM_THRESHOLD_=$((32 << 20))) ;;
*) die "FIXED_MALLOC=$FIXED_MALLOC: 0 or 1" ;;
esac
PPROF=${PPROF:-0}
WORKDIR=${WORKDIR:-/var/tmp}
OUT=${OUT:-}
[[ -z $OUT ]] || OUT=$(realpath -m "$OUT") # lib.sh changes to the checkout
NAME=mlperf
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
need_packages xfsprogs python3-matplotlib
if [[ -z $OUT ]]; then
	OUT=docs/bench
	[[ $SMOKE != 1 ]] || OUT=$RUN/out
fi
mkdir -p "$OUT"
started=$SECONDS
DRIVER=integration/bench/mlperf.py
# aifs_plan is imported from this checkout, in each rank: byte-compile it first, as pip does when
# it installs the package. Compiled from source in a rank (no __pycache__, PYTHONDONTWRITEBYTECODE),
# the compiler's freed memory left holes of ~1 MB in the rank's heap; the DataLoader workers forked
# from it then gave their heap's top back to the kernel after each sample and faulted it in again
# for the next (~330 minor faults a RetinaNet sample, 10% more CPU): issue 46's open case
# (docs/bench/mlperf.md, "Findings").
$PY -m compileall -q python/aifs >/dev/null || die "cannot byte-compile python/aifs"
RESULTS=$RUN/results.jsonl

# The workloads' shapes: record bytes, files, batch, step seconds, AU floor, decode.
case $ACCEL in
a100) resnet_step=0.435 ;;
h100) resnet_step=0.224 ;;
*) die "ACCEL=$ACCEL: a100 or h100" ;;
esac
shape() {
	case $1 in
	resnet50) echo 114660 "$RESNET50_FILES" $((400 / SCALE)) "$(awk -v s="$resnet_step" -v k="$SCALE" 'BEGIN{printf "%.6f", s / k}')" 0.90 raw ;;
	retinanet) echo 322957 "$RETINANET_FILES" 24 0.04755 0.85 pil ;;
	*) die "unknown workload $1 (resnet50, retinanet)" ;;
	esac
}
for e in $SYSTEMS; do
	case ${e%%:*} in ext4 | xfs | aifs | aifs-kernel | ext4-mem) ;; *) die "SYSTEMS: unknown system ${e%%:*}" ;; esac
	case $e in *:*) case ${e#*:} in dlio | torch | plan) ;; *) die "SYSTEMS: unknown sampler in $e" ;; esac ;; esac
done
want_xfs=0 want_fuse=0
for e in $SYSTEMS; do
	[[ ${e%%:*} != xfs ]] || want_xfs=1
	[[ ${e%%:*} != aifs ]] || want_fuse=1
	[[ ${e%%:*} != ext4-mem || $WARMUP -gt 0 ]] || die "ext4-mem needs WARMUP > 0 (its warm-up epoch reads the dataset into memory)"
done

meta() { printf '{"meta": {"%s": %s}}\n' "$1" "$($PY -c 'import json,sys; print(json.dumps(sys.argv[1]))' "$2")" >>"$RESULTS"; }
echo "== machine: $(machine)" >&2
meta machine "$(machine)"
meta date "$(date -u +%F)"
meta commit "$(commit_desc "$OUT")"
meta shared "yes: another engineer builds and tests on this machine during the run (load average $(cut -d' ' -f1-3 /proc/loadavg) at the start)"
for v in WORKLOADS SYSTEMS RESNET50_FILES RETINANET_FILES NS NOCOMPUTE_N EPOCHS WARMUP ACCEL SCALE THREADS PROC_MB RANK_MB STOP FIO_S PPROF PASSES PERF FIXED_MALLOC; do meta "$v" "${!v}"; done

# --- 1. the datasets ---------------------------------------------------------------------------
mib=0
for wl in $WORKLOADS; do
	read -r rec files _ <<<"$(shape "$wl")"
	mib=$((mib + rec * files / 1048576))
done
fs_image ext4 $((mib * 2 + mib / 5 + 512)) "$RUN/ext4" # trees and shard sets
[[ $want_xfs == 0 ]] || fs_image xfs $((mib + mib / 5 + 512)) "$RUN/xfs"
declare -A BYTES
for wl in $WORKLOADS; do
	read -r rec files _ <<<"$(shape "$wl")"
	echo "== $wl: writing $files files of $rec bytes" >&2
	$PY "$DRIVER" gen "$wl" "$files" "$RUN/ext4/$wl/tree"
	[[ $want_xfs == 0 ]] || { mkdir -p "$RUN/xfs/$wl" && cp -a "$RUN/ext4/$wl/tree" "$RUN/xfs/$wl/tree"; }
	"$AIFS" pack --quiet "$RUN/ext4/$wl/tree" "$RUN/ext4/$wl/set"
	BYTES[$wl]=$((rec * files))
	meta "bytes_$wl" "${BYTES[$wl]}"
done
echo "== datasets ready after $((SECONDS - started)) s" >&2

# --- 2. the runs ---------------------------------------------------------------------------------
# point WL ENTRY N STEP runs one measurement (see the header) and appends it to RESULTS, with its
# workload, system, limit, floor and, for aifs, the daemon's CPU ticks and FUSE requests over the
# run. It sets POINT_AU to the run's median AU.
point() {
	local wl=$1 entry=$2 n=$3 step=$4 sys=${2%%:*} sampler=dlio rec files batch floor decode limit root mnt="" pid="" t0=0 q0=0 t1=0 q1=0 f0=0 f1=0 out
	local metrics=() prof="" profpid="" stats=$RUN/stats.json
	[[ $entry != *:* ]] || sampler=${entry#*:}
	read -r rec files batch _ floor decode <<<"$(shape "$wl")"
	limit=$((BYTES[$wl] / 5 + (PROC_MB + n * RANK_MB) * 1048576))
	[[ $sys != ext4-mem ]] || limit=$((BYTES[$wl] * 2 + (PROC_MB + n * RANK_MB) * 1048576)) # room for all
	new_cgroup "$limit"
	case $sys in
	ext4 | xfs) root=$RUN/$sys/$wl/tree ;;
	ext4-mem) root=$RUN/ext4/$wl/tree ;; # the warm-up epoch reads it into memory
	aifs | aifs-kernel)
		mnt=$(mktemp -d "$RUN/mnt-$wl-${entry//:/-}-$n-$step.XXXXXX") # PASSES > 1: one a pass
		[[ $PPROF == 0 || $step != 0 ]] || metrics=(--metrics-addr 127.0.0.1:6946)
		if [[ $sys == aifs ]]; then
			in_cg "$CG" "$AIFS" mount "${metrics[@]}" "$RUN/ext4/$wl/set" "$mnt"
		else # the kernel data plane (docs/kernel.md)
			in_cg "$CG" "$AIFS" mount "${metrics[@]}" -o data=kernel "$RUN/ext4/$wl/set" "$mnt"
		fi
		pid=$(daemon_pid "$RUN/ext4/$wl/set")
		[[ -n $pid ]] || die "no aifs daemon found for $RUN/ext4/$wl/set"
		root=$mnt
		;;
	esac
	dropcaches
	if [[ -n $pid ]]; then
		t0=$(cpu_ticks "$pid")
		f0=$(awk '{print $12}' "/proc/$pid/stat")
		q0=$($PY -c 'import json,sys; print(json.load(open(sys.argv[1]))["requests"])' "$(stats_file "$mnt")")
	fi
	out=$RUN/point.json
	if [[ ${#metrics[@]} -gt 0 ]]; then
		mkdir -p "$OUT/mlperf-pprof"
		prof=$OUT/mlperf-pprof/$wl-${entry//:/-}-$n.pprof
		curl -s -o "$prof" "http://127.0.0.1:6946/debug/pprof/profile?seconds=$PPROF" &
		profpid=$!
	fi
	local perf=()
	if [[ $PERF != 0 ]]; then
		mkdir -p "$OUT/mlperf-perf"
		perf=(perf record -q -F "$PERF" -g -o "$(mktemp -u "$OUT/mlperf-perf/$wl-${entry//:/-}-$n-$step.XXXXXX.data")" --)
	fi
	in_cg "$CG" "${perf[@]}" env LOCAL_WORLD_SIZE="$n" "${MALLOC_ENV[@]}" $PY "$DRIVER" run --root "$root" --sampler "$sampler" --n "$n" --batch "$batch" \
		--step "$step" --threads "$THREADS" --epochs "$EPOCHS" --warmup "$WARMUP" --record "$rec" --decode "$decode" >"$out" ||
		die "$wl $entry N=$n step $step: the run failed"
	echo '{}' >"$stats"
	if [[ -n $pid ]]; then
		t1=$(cpu_ticks "$pid")
		f1=$(awk '{print $12}' "/proc/$pid/stat")
		cat "$(stats_file "$mnt")" >"$stats"
		q1=$($PY -c 'import json,sys; print(json.load(open(sys.argv[1]))["requests"])' "$stats")
		[[ -z $profpid ]] || wait "$profpid" || echo "== $wl $entry N=$n: no CPU profile" >&2
		unmount_daemon "$mnt" "$pid"
	fi
	$PY "$DRIVER" record "$RESULTS" workload="$wl" system="$entry" floor="$floor" limit="$limit" \
		dataset_bytes="${BYTES[$wl]}" daemon_ticks=$((t1 - t0)) daemon_majflt=$((f1 - f0)) requests=$((q1 - q0)) clk_tck="$(getconf CLK_TCK)" \
		daemon="$([[ -n $pid ]] && echo 1 || echo 0)" stats=@"$stats" <"$out"
	POINT_AU=$($PY -c 'import json,sys,statistics as s; print(s.median(e["au"] for e in json.load(open(sys.argv[1]))["epochs"] if not e["warmup"]))' "$out")
	echo "== $wl $entry N=$n step $step: AU $POINT_AU after $((SECONDS - started)) s" >&2
}
# fio_point WL N records fio's O_DIRECT random reads of WL's sample, N × THREADS jobs, and marks
# WL-N in FIOED.
declare -A FIOED
fio_point() {
	local wl=$1 n=$2 rec iops
	FIOED[$wl-$n]=1
	read -r rec _ <<<"$(shape "$wl")"
	iops=$(fio_run "$RUN/ext4/$wl/set/shard-000000.dat" randread "$(fio_block "$rec" 1)" $((n * THREADS)) \
		--iodepth=1 --time_based --runtime="$FIO_S")
	printf '{"workload": "%s", "system": "fio", "n": %d, "jobs": %d, "samples_per_s": %s}\n' "$wl" "$n" $((n * THREADS)) "$iops" >>"$RESULTS"
}

# roundtrip_point WL records what a FUSE round trip costs the machine (mlperf.py roundtrip): WL's
# files warm, read whole by NOCOMPUTE_N × THREADS processes, on ext4 and through the FUSE plane
# mounted outside any cgroup, 5 shuffled epochs each; the report's bound of the FUSE plane.
roundtrip_point() {
	local wl=$1 mnt pid out=$RUN/roundtrip.json
	mnt=$(mktemp -d "$RUN/mnt-$wl-roundtrip.XXXXXX")
	"$AIFS" mount "$RUN/ext4/$wl/set" "$mnt"
	pid=$(daemon_pid "$RUN/ext4/$wl/set")
	[[ -n $pid ]] || die "no aifs daemon found for $RUN/ext4/$wl/set"
	$PY "$DRIVER" roundtrip $((NOCOMPUTE_N * THREADS)) 5 "$RUN/ext4/$wl/tree" "$mnt" >"$out" ||
		die "$wl: the round-trip run failed"
	unmount_daemon "$mnt" "$pid"
	sed -n 1p "$out" | $PY "$DRIVER" record "$RESULTS" workload="$wl" system=roundtrip fs=ext4
	sed -n 2p "$out" | $PY "$DRIVER" record "$RESULTS" workload="$wl" system=roundtrip fs=aifs
	echo "== $wl: round trip measured after $((SECONDS - started)) s" >&2
}

read -r -a systems <<<"$SYSTEMS"
for wl in $WORKLOADS; do
	read -r _ _ _ step floor _ <<<"$(shape "$wl")"
	declare -A failed=()
	k=0
	for n in $NS; do
		ran=0
		for _ in $(seq "$PASSES"); do
			for i in "${!systems[@]}"; do
				e=${systems[(i + k) % ${#systems[@]}]}
				[[ $STOP == 0 || ${failed[$e]:-0} -lt $STOP ]] || continue
				point "$wl" "$e" "$n" "$step"
				ran=1
				if awk -v a="$POINT_AU" -v f="$floor" 'BEGIN{exit !(a < f)}'; then
					failed[$e]=$((${failed[$e]:-0} + 1))
				else
					failed[$e]=0
				fi
			done
			k=$((k + 1))
		done
		[[ $ran == 0 ]] || fio_point "$wl" "$n" # none ran: the sweep is over
	done
	for p in $(seq "$PASSES"); do
		for i in "${!systems[@]}"; do point "$wl" "${systems[(i + p - 1) % ${#systems[@]}]}" "$NOCOMPUTE_N" 0; done
	done
	[[ -n ${FIOED[$wl-$NOCOMPUTE_N]:-} ]] || fio_point "$wl" "$NOCOMPUTE_N"
	[[ $want_fuse == 0 ]] || roundtrip_point "$wl"
	unset failed
done
meta seconds $((SECONDS - started))
echo "== measured in $((SECONDS - started)) s" >&2

# --- 3. the report -------------------------------------------------------------------------------
cp "$RESULTS" "$OUT/mlperf.jsonl"
$PY integration/bench/mlperf_report.py "$OUT/mlperf.jsonl" "$OUT"
if [[ $SMOKE == 1 ]]; then # every run must have made its row
	want=$(($(wc -w <<<"$WORKLOADS") * ($(wc -w <<<"$NS") + 1) * $(wc -w <<<"$SYSTEMS")))
	got=$(grep -vc '^workload' "$OUT/mlperf.tsv" | tr -d ' ')
	got=$((got - $(grep -c $'\tfio\t' "$OUT/mlperf.tsv" || true)))
	[[ $got -eq $want ]] || die "smoke: $got rows in mlperf.tsv, $want expected"
	echo "== smoke run passed: $got rows" >&2
fi
