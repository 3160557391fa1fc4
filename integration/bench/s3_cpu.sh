#!/usr/bin/env bash
# s3_cpu.sh — where the CPU of a cold shuffled epoch of aifs over S3 goes, for builds of aifs side
# by side: each round mounts every build in BINS afresh on an empty --cache-dir, drops the
# kernel's caches and reads one epoch (aifs bench, J readers: it lists the tree first, so the
# names are known and the data cold, as in a training job); builds alternate within
# a round, so the machine's drift hits them alike. Per epoch it prints files/s, the CPU a
# sample of the daemon, of versitygw and of the latency proxy (integration/s3delay, with
# DELAY), the whole machine's busy share and CPU a sample, the daemon's page faults a sample
# and peak RSS, the bytes and requests the daemon fetched from S3, its READs and the samples
# push_chunks put in the page cache. The figures of the experiments in docs/bench/README.md
# (chunk sizes, the write queue, the proxy, push_chunks) come from it.
# Needs root.
#
# Environment (defaults in brackets):
#   BINS ["cur=bin/aifs"]: LABEL=PATH of each build (build others with go build -o PATH ./cmd/aifs);
#              a LABEL ending in -kernel mounts with -o data=kernel (the kernel data plane over
#              S3: EROFS over copies of the shards in the --cache-dir, docs/kernel.md), e.g.
#              BINS="cur=bin/aifs cur-kernel=bin/aifs"
#   FILES [10000]   J [32]   ROUNDS [2]   DELAY [10ms] ("" for none)   WORKDIR [/var/tmp]
#   PERF [""]: a directory; each epoch's daemon is also profiled (perf record -g) into
#              PERF/LABEL-ROUND.data (perf report -i FILE); the profiling adds to its CPU.
#              PERFARGS ["-g"]: perf record's options, e.g. "-g -e page-faults"
#              PERF_ALL [""]: 1 profiles the whole machine instead (perf record -a; perf report
#              --sort comm splits it into aifs (the daemon and aifs bench), versitygw, kernel threads)
#   CACHE_ROOT [the run's ext4 image]: where each epoch's --cache-dir goes; /dev/shm takes the
#              disk out of the measurement (tmpfs takes O_DIRECT writes as copies)
set -euo pipefail

FILES=${FILES:-10000}
J=${J:-32}
ROUNDS=${ROUNDS:-2}
DELAY=${DELAY-10ms}
BINS=${BINS:-cur=bin/aifs}
WORKDIR=${WORKDIR:-/var/tmp}
NAME=s3cpu
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
need_versitygw
unset AWS_CA_BUNDLE AWS_PROFILE AWS_SESSION_TOKEN AWS_DEFAULT_REGION
export AWS_ACCESS_KEY_ID=aifsbench AWS_SECRET_ACCESS_KEY=aifsbenchsecret AWS_REGION=us-east-1

PIDS="" # the server and the proxy
CACHES=""  # the disk caches' directory, when outside the run directory (CACHE_ROOT)
s3cpu_cleanup() {
	awk -v run="$RUN" 'index($2, run) == 1 && ($3 ~ /^fuse/ || $3 == "erofs") { print $2 }' /proc/mounts |
		while read -r m; do unmount_aifs "$m" 2>/dev/null || umount -l "$m"; done
	for p in $PIDS; do kill "$p" 2>/dev/null || true; done
	[[ -z $CACHES || $CACHES == "$RUN"/* ]] || rm -rf "$CACHES"
	cleanup
}
trap s3cpu_cleanup EXIT

fs_image ext4 $((FILES * 112640 * 4 / 1048576 + 1024)) "$RUN/disk"
mkdir -p "$RUN/disk/root/aifs"
CACHES=$RUN/disk
[[ -z ${CACHE_ROOT:-} ]] || CACHES=$(mktemp -d "$CACHE_ROOT/aifs-s3cpu.XXXXXX")
PORT=$($PY -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
export AWS_ENDPOINT_URL=http://127.0.0.1:$PORT
"$AIFS_VERSITYGW" --port "127.0.0.1:$PORT" --access "$AWS_ACCESS_KEY_ID" --secret "$AWS_SECRET_ACCESS_KEY" \
	--quiet --keep-alive posix "$RUN/disk/root" >"$RUN/versitygw.log" 2>&1 &
VGW=$!
PIDS=$VGW
for _ in $(seq 100); do (exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null && break; sleep 0.1; done
go run ./integration/gendata --files "$FILES" --classes $((FILES / 100 > 0 ? FILES / 100 : 1)) "$RUN/tree" >&2
"$AIFS" pack --quiet "$RUN/tree" s3://aifs/data
PROXY=""
if [[ -n $DELAY ]]; then
	go build -o "$RUN/s3delay" ./integration/s3delay
	"$RUN/s3delay" --target "$AWS_ENDPOINT_URL" --delay "$DELAY" >"$RUN/s3delay.out" 2>"$RUN/s3delay.log" &
	PROXY=$!
	PIDS="$PIDS $PROXY"
	for _ in $(seq 100); do [[ -s $RUN/s3delay.out ]] && break; sleep 0.1; done
	AWS_ENDPOINT_URL=$(head -1 "$RUN/s3delay.out")
	[[ $AWS_ENDPOINT_URL == http://* ]] || die "s3delay did not start: $(cat "$RUN/s3delay.log")"
fi

HZ=$(getconf CLK_TCK)
per_sample() { awk -v t="$1" -v hz="$HZ" -v n="$FILES" 'BEGIN{printf "%.0f", t / hz * 1e6 / n}'; } # TICKS → µs a sample
echo "s3_cpu.sh: $(date -u +%Y-%m-%dT%H:%MZ), $(machine), FILES=$FILES J=$J ROUNDS=$ROUNDS DELAY=$DELAY BINS=\"$BINS\""
for r in $(seq "$ROUNDS"); do
	for b in $BINS; do
		label=${b%%=*} bin=${b#*=} mnt=$RUN/mnt-${b%%=*} cache=$CACHES/cache-${b%%=*}
		rm -rf "$cache"
		mkdir -p "$cache" "$mnt"
		opts=()
		[[ $label != *-kernel ]] || opts=(-o data=kernel)
		"$bin" mount --cache-dir "$cache" "${opts[@]}" s3://aifs/data "$mnt"
		[[ $label != *-kernel || $(findmnt -n -o FSTYPE "$mnt") == erofs ]] || die "$label: $mnt is not the kernel plane"
		pid=$(daemon_pid "$mnt")
		dropcaches
		d0=$(cpu_ticks "$pid") v0=$(cpu_ticks "$VGW") x0=$([[ -n $PROXY ]] && cpu_ticks "$PROXY" || echo 0)
		f0=$(awk '{print $10}' "/proc/$pid/stat")
		read -r b0 i0 < <(cpu_busy_idle)
		perfpid=""
		if [[ -n ${PERF:-} ]]; then
			mkdir -p "$PERF"
			target=(-p "$pid")
			if [[ -n ${PERF_ALL:-} ]]; then target=(-a); fi
			perf record ${PERFARGS:--g} -q "${target[@]}" -o "$PERF/$label-$r.data" 2>/dev/null &
			perfpid=$!
		fi
		fps=$("$AIFS" bench --json -j "$J" "$mnt" | $PY -c 'import json,sys; print(round(json.load(sys.stdin)["passes"][0]["files_per_s"]))')
		read -r b1 i1 < <(cpu_busy_idle)
		if [[ -n $perfpid ]]; then kill -INT "$perfpid" && wait "$perfpid" || true; fi
		d1=$(cpu_ticks "$pid") v1=$(cpu_ticks "$VGW") x1=$([[ -n $PROXY ]] && cpu_ticks "$PROXY" || echo 0)
		f1=$(awk '{print $10}' "/proc/$pid/stat")
		rss=$(awk '/VmHWM/ {printf "%.0f", $2 / 1024}' "/proc/$pid/status")
		read -r s3mb s3req reads pushed < <("$AIFS" stats --json "$mnt" | $PY -c 'import json,sys; j=json.load(sys.stdin); s=j["storage"]["s3"]; print(round(s["bytes"] / 1e6), s["requests"], j["ops"]["read"]["count"], j["prefetch"]["arrived"])')
		echo "round $r, $label: $fps files/s; CPU µs a sample: daemon $(per_sample $((d1 - d0))), server $(per_sample $((v1 - v0))), proxy $(per_sample $((x1 - x0))), machine $(per_sample $((b1 - b0))) ($(busy_percent "$b0" "$i0" "$b1" "$i1")% busy); faults a sample $(awk -v f=$((f1 - f0)) -v n="$FILES" 'BEGIN{printf "%.1f", f / n}'); peak RSS ${rss} MB; from S3: $s3mb MB in $s3req requests; $reads READs, $pushed samples pushed (push_chunks)"
		unmount_aifs "$mnt"
		for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done # the next mount starts on an idle machine
	done
done
