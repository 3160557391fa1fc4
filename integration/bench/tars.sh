#!/usr/bin/env bash
# tars.sh — tars indexed in place (aifs index) against reading them, archivemount and aifs pack,
# side by side in one run on one disk. It
#   1. writes TARS tars of MEMBERS members each (random bytes, sizes uniform over MEMBER_SIZE/2 to
#      3×MEMBER_SIZE/2, ustar as Go's archive/tar writes it, members named KEY.bin) to an ext4
#      image, loop-mounted with direct I/O as compare.sh's are, and measures, RUNS passes, caches
#      dropped before each command, in turn within a pass: `cat` of every tar to /dev/null, one
#      tar after another, and 4 at a time (cat4), as aifs index reads them; `aifs index
#      --no-checksums` (headers only) and `aifs index` (every byte read and checksummed), each
#      with its CPU time and peak RSS; and archivemount, which mounts one archive a mount: AM_TARS of the
#      tars, evenly spread, each mounted, listed with `find MNT | wc -l` and unmounted in turn,
#      the seconds of the mounts and listings summed and scaled to all TARS;
#   2. mounts that set's checksummed index RUNS times, caches dropped first: the seconds `aifs
#      mount` takes to return (it returns once the mount is live), the daemon's VmRSS then, the
#      seconds of `find MNT | wc -l` over the mount, and the daemon's VmRSS after it;
#   3. generates FILES real JPEGs (gendata --jpeg, mean ~110 KB, FILES/100 classes) on a second
#      ext4 image, writes them as WebDataset tars of PER_TAR samples, shuffled
#      (integration/torchcheck/wds.py: KEY.JPEG and KEY.cls members, and classes.txt), indexes
#      those with --view imagefolder --class-names classes.txt and packs the tree with aifs pack
#      (each timed, cold), twice each, in the order packed a, tars a, tars b, packed b (where a set
#      lies on this disk moves its speed by 10-20%: two placements each); then reads the tree
#      on ext4 and the mounts of the two packed sets and the two tars interleaved pass by pass:
#      cold shuffled epochs at each reader count in JOBS (`aifs bench --drop-caches --relist`, one
#      epoch a pass, RUNS passes; the imagefolder view has the tree's paths, so aifs bench checks
#      that all five served the same bytes), and ImageFolder + DataLoader (dataloader.py:
#      PT_SAMPLES samples, WORKERS workers, RUNS passes); each copy gives a figure a pass, and a
#      ratio pairs each copy of the tars with the same copy of the packed set;
#   4. writes OUT/tars.md (the machine, the figures, the ratios against the issue's targets) and
#      OUT/tars.tsv (every figure and its passes).
# A figure is the median of its passes; a ratio, the median of the passes' ratios (the systems of
# a pass ran within seconds of each other, so the disk's drift over minutes cancels). Commits
# nothing. Needs root (loop devices, mounts, drop_caches). About 9 minutes with the defaults on
# 2 cores (more where other work shares them: half of it is CPU-bound).
#
# Environment (defaults in brackets):
#   TARS [1000]  MEMBERS [1280]  MEMBER_SIZE [1024] (bytes, mean)  AM_TARS [50] (0: no archivemount)
#   FILES [10000]  PER_TAR [1000]  JOBS ["1 8"]  RUNS [7]  PT_SAMPLES [1500]  WORKERS [nproc]
#   WORKDIR [/var/tmp]  OUT [docs/bench, from the checkout]  NOTE [empty] a line for the report,
#   e.g. what else ran on the machine
set -euo pipefail

TARS=${TARS:-1000}
MEMBERS=${MEMBERS:-1280}
MEMBER_SIZE=${MEMBER_SIZE:-1024}
AM_TARS=${AM_TARS:-50}
FILES=${FILES:-10000}
PER_TAR=${PER_TAR:-1000}
JOBS=${JOBS:-1 8}
RUNS=${RUNS:-7}
PT_SAMPLES=${PT_SAMPLES:-1500}
WORKERS=${WORKERS:-$(nproc)}
WORKDIR=${WORKDIR:-/var/tmp}
OUT=${OUT:-docs/bench}
NOTE=${NOTE:-}
NAME=tars
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
need_packages archivemount time
[[ $AM_TARS -le $TARS ]] || AM_TARS=$TARS
mkdir -p "$OUT"
started=$SECONDS

# Every figure's passes go to RES/CASE.SYSTEM, one a line, in pass order; the run's description
# to RES/meta (KEY, tab, value).
RES=$RUN/results
mkdir "$RES"

echo "== machine: $(machine)" >&2
meta machine "$(machine)"
meta date "$(date -u +%F)"
meta load "$(cut -d' ' -f1-3 /proc/loadavg)"
meta commit "$(commit_desc "$OUT")"
for v in TARS MEMBERS MEMBER_SIZE AM_TARS FILES PER_TAR JOBS RUNS PT_SAMPLES WORKERS NOTE; do meta "$v" "${!v}"; done

# --- 1. TARS×MEMBERS small members: index time against cat and archivemount --------------------
small=$RUN/small
fs_image ext4 $((TARS * MEMBERS * (MEMBER_SIZE + 1024) / 1048576 * 5 / 4 + 1024)) "$small"
go run ./integration/genarchives -format tar -n "$TARS" -members "$MEMBERS" -size "$MEMBER_SIZE" "$small/tars"
meta tar_bytes "$(du -sb --apparent-size "$small/tars" | cut -f1)"
echo "== $TARS tars of $MEMBERS members written after $((SECONDS - started)) s" >&2

# The tars archivemount mounts, evenly spread over the set.
am=()
for ((i = 0; i < AM_TARS; i++)); do am+=("$(printf '%s/tars/train-%06d.tar' "$small" $((i * TARS / AM_TARS)))"); done
# archivemount_pass FIGURE mounts each tar of am in turn with archivemount (read-only), lists it
# (every member and the root) and unmounts it, and appends the seconds of the mounts and
# listings, summed and scaled from the AM_TARS tars to all TARS, to FIGURE.
archivemount_pass() {
	local t t0 us=0
	for t in "${am[@]}"; do
		t0=${EPOCHREALTIME/[.,]/}
		archivemount -o readonly "$t" "$RUN/am"
		listing "$RUN/am" $((MEMBERS + 1))
		us=$((us + ${EPOCHREALTIME/[.,]/} - t0))
		umount "$RUN/am"
	done
	secs $((us * TARS / AM_TARS)) >>"$RES/$1"
}
mkdir "$RUN/am"
for p in $(seq "$RUNS"); do
	dropcaches
	timed index.cat cpu_rss cpu.cat rss.cat cat "$small"/tars/*.tar >/dev/null
	dropcaches
	# 4 cats at a time, 10 tars each: aifs index's 4 tars in flight, at 100 forks rather than 1,000
	dropcaches
	timed index.cat4 cpu_rss cpu.cat4 rss.cat4 xargs -0 -n 10 -P 4 cat < <(printf '%s\0' "$small"/tars/*.tar) >/dev/null
	dropcaches
	# Each pass indexes afresh, as a first index does: the last pass's index is removed, not
	# replaced with --force, which loads the old index whole before it writes the new one.
	rm -f "$small/headers/index.aifs" "$small/checksums/index.aifs"
	dropcaches
	timed index.headers cpu_rss cpu.headers rss.headers "$AIFS" index --quiet --no-checksums "$small/tars" "$small/headers"
	dropcaches
	timed index.checksums cpu_rss cpu.checksums rss.checksums "$AIFS" index --quiet "$small/tars" "$small/checksums"
	if [[ $AM_TARS -gt 0 ]]; then
		dropcaches
		archivemount_pass index.archivemount
	fi
	echo "== index pass $p done after $((SECONDS - started)) s" >&2
done
meta index_bytes "$(stat -c %s "$small/checksums/index.aifs")"

# --- 2. mount time and daemon RSS over TARS×MEMBERS members --------------------------------------
mkdir "$RUN/mnt-small"
for p in $(seq "$RUNS"); do
	dropcaches
	timed mount.aifs "$AIFS" mount "$small/checksums" "$RUN/mnt-small"
	pid=$(daemon_pid "$small/checksums")
	[[ -n $pid ]] || die "no daemon found for the mount of $small/checksums"
	rss_kib "$pid" >>"$RES/rss-mounted.aifs"
	timed list.aifs listing "$RUN/mnt-small" $((1 + TARS + TARS * MEMBERS))
	rss_kib "$pid" >>"$RES/rss-listed.aifs"
	unmount_daemon "$RUN/mnt-small" "$pid"
done
echo "== mounts done after $((SECONDS - started)) s" >&2

# --- 3. FILES JPEGs as WebDataset tars, through the imagefolder view, against aifs pack and ext4 --
jpeg=$RUN/jpeg
fs_image ext4 $((FILES * 112640 / 1048576 * 6 + 1024)) "$jpeg" # tree, 2 × (tars, shard set)
go run ./integration/gendata --jpeg --files "$FILES" --classes $((FILES / 100 > 0 ? FILES / 100 : 1)) "$jpeg/tree" >&2
jpeg_bytes=$(du -sb --apparent-size "$jpeg/tree" | cut -f1)
# Two copies of each, written in the order packed a, tars a, tars b, packed b: where a set lies
# on this disk moves its speed by 10-20% (with one copy of each, one run gave tars/pack 0.87 and
# 0.95 at 1 and 8 readers, another with the packed set written first 1.02 and 1.04; in a run with
# two copies, copy a read 10-20% faster than copy b for both systems). Each pass reads both
# copies; the ratios pair each copy of the tars with the same copy of the packed set, so that a
# ratio's passes sample two placements, each system written first in one.
tars_copy() {
	$PY integration/torchcheck/wds.py "$jpeg/tree" "$jpeg/tars-$1" --per-tar "$PER_TAR" --shuffle 1
	dropcaches
	timed jpeg-index.aifs "$AIFS" index --quiet --view imagefolder --class-names "$jpeg/tars-$1/classes.txt" "$jpeg/tars-$1" "$jpeg/tars-$1"
}
pack_copy() {
	dropcaches
	timed jpeg-pack.aifs "$AIFS" pack --quiet "$jpeg/tree" "$jpeg/set-$1"
}
pack_copy a
tars_copy a
tars_copy b
pack_copy b
SYSTEMS=(ext4 packed tars packed tars)
DIRS=("$jpeg/tree" "$RUN/mnt-packed-a" "$RUN/mnt-tars-a" "$RUN/mnt-packed-b" "$RUN/mnt-tars-b")
SETS=("" "$jpeg/set-a" "$jpeg/tars-a" "$jpeg/set-b" "$jpeg/tars-b")
mkdir "${DIRS[@]:1}"
PIDS=("")
for i in 1 2 3 4; do
	"$AIFS" mount "${SETS[i]}" "${DIRS[i]}"
	PIDS+=("$(daemon_pid "${SETS[i]}")")
	[[ -n ${PIDS[i]} ]] || die "no daemon found for the mount of ${SETS[i]}"
done
meta jpeg_bytes "$jpeg_bytes"
echo "== $FILES JPEGs ready after $((SECONDS - started)) s" >&2

# counters MNT PID prints the CPU ticks of the daemon PID so far and the bytes it read from the
# shards (its stats' backend.bytes); counted CASE SYSTEM BEFORE MNT PID appends, from the counters
# BEFORE an epoch to now, the daemon's CPU µs a file to cpu-CASE.SYSTEM and the shard bytes it
# read over the dataset's to disk-CASE.SYSTEM.
counters() {
	echo "$(cpu_ticks "$2") $($PY -c 'import json,sys; print(json.load(open(sys.argv[1]))["backend"]["bytes"])' "$1/.aifs/stats")"
}
counted() {
	local case=$1 system=$2 t0 b0 t1 b1
	read -r t0 b0 <<<"$3"
	read -r t1 b1 <<<"$(counters "$4" "$5")"
	awk -v t="$((t1 - t0))" -v hz="$(getconf CLK_TCK)" -v f="$FILES" 'BEGIN {printf "%.1f\n", t / hz * 1e6 / f}' >>"$RES/cpu-$case.$system"
	awk -v b="$((b1 - b0))" -v n="$jpeg_bytes" 'BEGIN {printf "%.4f\n", b / n}' >>"$RES/disk-$case.$system"
}

# per_copy CASE V... appends a pass's figures V, one for each of DIRS in order, to RES/CASE.SYSTEM:
# for copy a, then copy b, ext4's and then each system's, so that the lines of the three files
# pair up (ext4's figure twice).
per_copy() {
	local case=$1
	shift
	local v=("$@") c
	for c in 1 3; do
		echo "${v[0]}" >>"$RES/$case.ext4"
		echo "${v[c]}" >>"$RES/$case.packed"
		echo "${v[c + 1]}" >>"$RES/$case.tars"
	done
}

# A pass reads the five in turn, starting with the next one each pass (ext4 first in pass 1, the
# packed set a in pass 2, ...), so that none always reads right after another. Each aifs daemon's
# CPU time and shard reads over the pass are its epoch's (it serves nothing else).
for j in $JOBS; do
	for p in $(seq "$RUNS"); do
		out=$RUN/cold-$j-$p.json
		k=$(((p - 1) % ${#DIRS[@]}))
		before=("")
		for i in 1 2 3 4; do before+=("$(counters "${DIRS[i]}" "${PIDS[i]}")"); done
		"$AIFS" bench --json --drop-caches --relist --seed "$p" -j "$j" "${DIRS[@]:k}" "${DIRS[@]:0:k}" >"$out" ||
			{ cat "$out" >&2; die "cold-$j pass $p: aifs bench failed (a read error, or the systems served different bytes)"; }
		# each DIR's files/s, in the order of DIRS
		read -r -a v < <($PY -c 'import json,sys; print(*(round(p["files_per_s"], 1) for p in json.load(open(sys.argv[1]))["passes"]))' "$out")
		per_copy "cold-$j" "${v[@]:${#v[@]}-k}" "${v[@]:0:${#v[@]}-k}"
		for i in 1 2 3 4; do counted "cold-$j" "${SYSTEMS[i]}" "${before[i]}" "${DIRS[i]}" "${PIDS[i]}"; done
	done
	echo "== cold shuffled epochs with $j readers done after $((SECONDS - started)) s" >&2
done
$PY integration/bench/dataloader.py "$PT_SAMPLES" "$WORKERS" "$RUNS" "${DIRS[@]}" >"$RUN/pytorch.out"
mapfile -t pt <"$RUN/pytorch.out" # a line a DIR: the median, then each pass
for p in $(seq "$RUNS"); do
	v=()
	for i in "${!DIRS[@]}"; do
		read -r -a line <<<"${pt[i]}"
		v+=("${line[p]}")
	done
	per_copy pytorch "${v[@]}"
done
echo "== measured in $((SECONDS - started)) s" >&2
meta seconds $((SECONDS - started))
meta load_end "$(cut -d' ' -f1-3 /proc/loadavg)"

# --- 4. the report ------------------------------------------------------------------------------
$PY - "$RES" "$OUT" <<'EOF'
import os
import statistics as st
import sys

res, out = sys.argv[1], sys.argv[2]
meta = dict(line.rstrip("\n").split("\t", 1) for line in open(os.path.join(res, "meta")))
fig = {}  # (case, system): passes
for name in os.listdir(res):
    if name != "meta":
        case, system = name.rsplit(".", 1)
        fig[(case, system)] = [float(x) for x in open(os.path.join(res, name)).read().split()]


def med(case, system):
    return st.median(fig[(case, system)])


def ratio(case, a, b):
    """a over b: the median of their passes' ratios, pass by pass."""
    return st.median(x / y for x, y in zip(fig[(case, a)], fig[(case, b)]))


def num(v):
    return f"{v:,.0f}" if v >= 100 else f"{v:.3g}"


def seconds_range(case, system):
    p = fig[(case, system)]
    return f"{min(p):.2f}–{max(p):.2f}"


def mib_range(case, system):
    p = fig[(case, system)]
    return f"{min(p) / 1024:.0f}–{max(p) / 1024:.0f} MiB"


def verdict(v, ok):
    """The figure a target is judged on, to one digit more than the tables give, and the verdict."""
    return f"**{'met' if ok else 'missed'}** ({v:#.3g})"


tars, members, runs = int(meta["TARS"]), int(meta["MEMBERS"]), int(meta["RUNS"])
n, tar_bytes, am_tars = tars * members, int(meta["tar_bytes"]), int(meta["AM_TARS"])
md = [
    "# Tars indexed in place (aifs index)",
    "",
    f"Measured by `sudo integration/bench/tars.sh` on {meta['date']} at commit {meta['commit']}, "
    f"in {int(meta['seconds']) // 60} min {int(meta['seconds']) % 60} s "
    f"(TARS={tars}, MEMBERS={members}, MEMBER_SIZE={meta['MEMBER_SIZE']}, AM_TARS={am_tars}, "
    f"FILES={meta['FILES']}, PER_TAR={meta['PER_TAR']}, JOBS=\"{meta['JOBS']}\", RUNS={runs}, "
    f"PT_SAMPLES={meta['PT_SAMPLES']}, WORKERS={meta['WORKERS']}).",
    "",
    f"**Machine:** {meta['machine']}; load average (1, 5, 15 minutes) {meta['load']} when the run "
    f"started, {meta['load_end']} when it ended (its own work included)."
    + (f" {meta['NOTE']}" if meta["NOTE"] else ""),
    "",
    f"Each figure is the median of {runs} passes (their range beside it), the systems interleaved "
    "pass by pass (in the JPEG section, each pass gives a figure for each of two copies); a ratio "
    "is the median of the passes' ratios. Everything is on ext4 images on the same disk, "
    "loop-mounted with direct I/O so that the guest does not cache them, and the caches are "
    "dropped before every timed command (cold).",
    "",
    f"## Index: {tars:,} tars of {members:,} members ({n:,} members, {tar_bytes / 1e9:.2f} GB of tar)",
    "",
    f"Members of {int(meta['MEMBER_SIZE']) // 2}–{int(meta['MEMBER_SIZE']) * 3 // 2} bytes of random "
    "data (uniform), ustar headers, as Go's archive/tar writes them. `aifs index` reads 4 tars at a "
    "time (its default --jobs); `cat` reads them one after another, cat4 4 at a time (10 tars to a "
    "`cat`). The target compares `aifs index` with `cat`; /cat4 is the same against the device's "
    "bound at aifs's concurrency. CPU seconds: user + system, of the `cat`s too; peak RSS: "
    "aifs index's largest resident set (both from GNU time). "
    "Each pass indexes afresh: the index the pass before wrote is removed first (`--force` would "
    "also load the old index whole before replacing it).",
    "",
    "| | seconds | range | members/s | MB/s of tar | /cat | /cat4 | CPU seconds | peak RSS | target |",
    "|---|---|---|---|---|---|---|---|---|---|",
]
rows = [("cat", "`cat` of every tar to /dev/null, one after another"),
        ("cat4", "`cat`, 4 at a time (xargs -P 4)"),
        ("headers", "`aifs index --no-checksums` (headers only)"),
        ("checksums", "`aifs index` (every byte read, CRC32C)"),
        ("archivemount", f"archivemount: mount + `find MNT \\| wc -l`, {am_tars} tars scaled to {tars:,}")]
for system, label in rows:
    if ("index", system) not in fig:
        continue
    s = med("index", system)
    target = ""
    if system == "headers":
        target = f"≤ 30 s: {verdict(s, s <= 30)}"
    elif system == "checksums":
        r = ratio("index", system, "cat")
        target = f"≤ 1.2× cat: {verdict(r, r <= 1.2)}"
    rel = [f"**{ratio('index', system, c):.2f}**" if system != c else "1" for c in ("cat", "cat4")]
    cpu = f"{med('cpu', system):.2f}" if ("cpu", system) in fig else ""
    rss = f"{med('rss', system) / 1024:,.0f} MiB" if system in ("headers", "checksums") else ""
    md.append(f"| {label} | {s:.2f} | {seconds_range('index', system)} | {num(n / s)} | {num(tar_bytes / 1e6 / s)} "
              f"| {rel[0]} | {rel[1]} | {cpu} | {rss} | {target} |")
md += ["", f"The index (`index.aifs`) of the {n:,} members is {int(meta['index_bytes']) / 2**20:.1f} MiB "
       f"({int(meta['index_bytes']) / n:.1f} bytes a member)."]
if ("index", "archivemount") in fig:
    md += ["", f"archivemount mounts one archive a mount: {am_tars} of the {tars:,} tars, evenly spread, were "
           "each mounted, listed and unmounted in turn after the caches were dropped; the seconds of the "
           f"mounts and listings (not of the unmounts) are summed and multiplied by {tars / am_tars:g}. "
           f"archivemount took **{ratio('index', 'archivemount', 'checksums'):.1f}×** as long as `aifs index` "
           f"with checksums, **{ratio('index', 'archivemount', 'headers'):.1f}×** as long as headers only."]
md += [
    "",
    f"## Mount and daemon memory over the {n:,} members",
    "",
    "`aifs mount` of the checksummed index, caches dropped first: the seconds until it returns "
    "(it returns once the mount is live), and the daemon's VmRSS then and after a full listing.",
    "",
    "| | median | range |",
    "|---|---|---|",
    f"| `aifs mount` until the mount is live | {med('mount', 'aifs'):.2f} s | {seconds_range('mount', 'aifs')} s |",
    f"| daemon VmRSS after the mount | {med('rss-mounted', 'aifs') / 1024:.0f} MiB | {mib_range('rss-mounted', 'aifs')} |",
    f"| `find MNT \\| wc -l` ({n + tars + 1:,} entries) | {med('list', 'aifs'):.2f} s | {seconds_range('list', 'aifs')} s |",
    f"| daemon VmRSS after the listing | {med('rss-listed', 'aifs') / 1024:.0f} MiB | {mib_range('rss-listed', 'aifs')} |",
    "",
]
files, jpeg_bytes = int(meta["FILES"]), int(meta["jpeg_bytes"])
md += [
    f"## {files:,} JPEGs as WebDataset tars, read through the imagefolder view",
    "",
    f"{files:,} JPEGs, {jpeg_bytes / 1e9:.2f} GB (mean {jpeg_bytes / files / 1e3:.0f} KB, log-normal sizes), "
    f"in {files // 100 or 1} classes, written by `integration/torchcheck/wds.py` as tars of "
    f"{meta['PER_TAR']} samples in shuffled order (KEY.JPEG and KEY.cls members), indexed with "
    "`aifs index --view imagefolder --class-names classes.txt` "
    f"({med('jpeg-index', 'aifs'):.2f} s, cold) and mounted; the same tree packed by `aifs pack` "
    f"({med('jpeg-pack', 'aifs'):.2f} s, cold) and mounted; and the tree itself on ext4. All on one "
    "ext4 image; the mounts with aifs's defaults. The tars and the packed set are there twice, "
    "written in the order packed a, tars a, tars b, packed b, because where a set lies on this "
    "disk moves its speed by 10-20% (with one copy of each, one run gave tars/pack 0.87 and 0.95 "
    "at 1 and 8 readers, another with the packed set written first 1.02 and 1.04): each pass reads "
    "both copies, each copy gives a figure (ext4's counted with each), and a ratio pairs each copy "
    "of the tars with the same copy of the packed set. Seconds to index and pack are the medians "
    "of the two copies. Every pass of the five served the same bytes (`aifs bench` digests).",
    "",
    "| | unit | ext4 | aifs pack | aifs index (tars) | tars/pack | tars/ext4 | pack/ext4 | target tars/pack ≥ 0.95 |",
    "|---|---|---|---|---|---|---|---|---|",
]
cases = [(f"cold-{j}", f"cold shuffled epoch, {j} reader{'s' if j != '1' else ''}", "files/s")
         for j in meta["JOBS"].split()]
cases.append(("pytorch", f"PyTorch ImageFolder + DataLoader, {meta['WORKERS']} workers", "samples/s"))
for case, label, unit in cases:
    r = ratio(case, "tars", "packed")
    md.append(f"| {label} | {unit} | {num(med(case, 'ext4'))} | {num(med(case, 'packed'))} | {num(med(case, 'tars'))} "
              f"| **{r:.2f}** | **{ratio(case, 'tars', 'ext4'):.2f}** | **{ratio(case, 'packed', 'ext4'):.2f}** | {verdict(r, r >= 0.95)} |")
    if ("cpu-" + case, "tars") in fig:
        for what, key, unit in (("daemon CPU a file", "cpu", "µs"), ("shard bytes read ÷ dataset", "disk", "")):
            k = f"{key}-{case}"
            md.append(f"| … {what} | {unit} | — | {med(k, 'packed'):.3g} | {med(k, 'tars'):.3g} "
                      f"| {ratio(k, 'tars', 'packed'):.2f} | | | |")
md += [
    "",
    "- **cold**: `aifs bench --drop-caches --relist --seed PASS -j READERS` over the five at once "
    "(caches dropped and the tree listed, untimed, before each system's epoch; each reader opens, "
    "reads to the end and closes one file at a time), one epoch a pass, as compare.sh runs it; "
    "each pass starts with the next system (ext4 first in pass 1, aifs pack a in pass 2, the tars a "
    "in pass 3, ...). Below each cold row, for each aifs daemon over its epoch: its CPU time (user + "
    "system, /proc) over the files read, and the bytes it read from the shards over the dataset's.",
    f"- **PyTorch**: `integration/bench/dataloader.py`: torchvision ImageFolder with the ImageNet "
    f"training transform, DataLoader(batch_size=32, shuffle=True, num_workers={meta['WORKERS']}), "
    f"{int(meta['PT_SAMPLES']):,} samples a pass, caches dropped before each.",
    "",
    "Every pass, per system: [tars.tsv](tars.tsv).",
    "",
]
with open(os.path.join(out, "tars.md"), "w") as f:
    f.write("\n".join(md))
with open(os.path.join(out, "tars.tsv"), "w") as f:
    f.write("case\tsystem\tmedian\tpasses\n")
    for (case, system), p in sorted(fig.items()):
        f.write(f"{case}\t{system}\t{st.median(p):g}\t{' '.join(f'{x:g}' for x in p)}\n")
    for k, v in meta.items():
        f.write(f"meta\t{k}\t{v}\t\n")
EOF
echo "== wrote $OUT/tars.md and $OUT/tars.tsv" >&2
