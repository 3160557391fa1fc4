#!/usr/bin/env bash
# zips.sh — ZIPs indexed in place (aifs index) against reading them and aifs pack, side by side in
# one run on one disk. It
#   1. writes ZIPS ZIPs of MEMBERS stored members each (random bytes, sizes uniform over
#      MEMBER_SIZE/2 to 3×MEMBER_SIZE/2, as Go's archive/zip writes them, members KEY.bin) to an
#      ext4 image, loop-mounted with direct I/O, and measures, RUNS passes, caches dropped before
#      each command: `cat` of every ZIP to /dev/null, and `aifs index` (the central directories
#      and local headers; the checksums are the CRC-32s the ZIPs record), with its CPU time and
#      peak RSS;
#   2. generates FILES real JPEGs (gendata --jpeg, mean ~110 KB, FILES/100 classes) on a second
#      ext4 image, zips the tree with Info-ZIP's zip -0 (CLASS/FILE members), indexes that with
#      --view imagefolder and packs the tree with aifs pack (each timed, cold); mounts both, and
#      reads the tree on ext4 and the two mounts in turn: cold shuffled epochs at each reader
#      count in JOBS (`aifs bench --drop-caches --relist`, one epoch a pass, RUNS passes, the
#      first system read moving each pass; aifs bench checks that the three served the same
#      bytes);
#   3. writes OUT/zips.md (the machine, the figures, the ratios against the issue's targets) and
#      OUT/zips.tsv (every figure and its passes).
# A figure is the median of its passes; a ratio, the median of the passes' ratios. Commits
# nothing. Needs root (loop devices, mounts, drop_caches).
#
# Environment (defaults in brackets):
#   ZIPS [100]  MEMBERS [12800]  MEMBER_SIZE [1024] (bytes, mean)  FILES [10000]  JOBS ["1 8"]
#   RUNS [5]  WORKDIR [/var/tmp]  OUT [docs/bench, from the checkout]  NOTE [empty]
set -euo pipefail

ZIPS=${ZIPS:-100}
MEMBERS=${MEMBERS:-12800}
MEMBER_SIZE=${MEMBER_SIZE:-1024}
FILES=${FILES:-10000}
JOBS=${JOBS:-1 8}
RUNS=${RUNS:-5}
WORKDIR=${WORKDIR:-/var/tmp}
OUT=${OUT:-docs/bench}
NOTE=${NOTE:-}
NAME=zips
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
need_packages zip time
mkdir -p "$OUT"
started=$SECONDS
RES=$RUN/results
mkdir "$RES"
# usage SYSTEM CMD... runs CMD under GNU time, appending its CPU seconds to cpu.SYSTEM and its
# peak RSS (KiB) to rss.SYSTEM.
usage() {
	local system=$1 user sys rss
	shift
	/usr/bin/time -o "$RUN/usage" -f '%U %S %M' "$@"
	read -r user sys rss <"$RUN/usage"
	echo "$user $sys" | awk '{print $1 + $2}' >>"$RES/cpu.$system"
	echo "$rss" >>"$RES/rss.$system"
}

echo "== machine: $(machine)" >&2
meta machine "$(machine)"
meta date "$(date -u +%F)"
meta load "$(cut -d' ' -f1-3 /proc/loadavg)"
meta commit "$(commit_desc "$OUT")"
for v in ZIPS MEMBERS MEMBER_SIZE FILES JOBS RUNS NOTE; do meta "$v" "${!v}"; done

# --- 1. ZIPS×MEMBERS small members: index time against cat --------------------------------------
small=$RUN/small
fs_image ext4 $((ZIPS * MEMBERS * (MEMBER_SIZE + 200) / 1048576 * 5 / 4 + 1024)) "$small"
go run ./integration/genarchives -format zip -n "$ZIPS" -members "$MEMBERS" -size "$MEMBER_SIZE" "$small/zips"
meta zip_bytes "$(du -sb --apparent-size "$small/zips" | cut -f1)"
echo "== $ZIPS ZIPs of $MEMBERS members written after $((SECONDS - started)) s" >&2
for p in $(seq "$RUNS"); do
	dropcaches
	timed index.cat usage cat cat "$small"/zips/*.zip >/dev/null
	rm -f "$small/index/index.aifs"
	dropcaches
	timed index.aifs usage aifs "$AIFS" index --quiet "$small/zips" "$small/index"
	echo "== index pass $p done after $((SECONDS - started)) s" >&2
done
meta index_bytes "$(stat -c %s "$small/index/index.aifs")"

# --- 2. FILES JPEGs zipped, through the imagefolder view, against aifs pack and ext4 -------------
jpeg=$RUN/jpeg
fs_image ext4 $((FILES * 112640 / 1048576 * 4 + 1024)) "$jpeg" # tree, ZIP, shard set
go run ./integration/gendata --jpeg --files "$FILES" --classes $((FILES / 100 > 0 ? FILES / 100 : 1)) "$jpeg/tree" >&2
meta jpeg_bytes "$(du -sb --apparent-size "$jpeg/tree" | cut -f1)"
dropcaches
timed jpeg-pack.aifs "$AIFS" pack --quiet "$jpeg/tree" "$jpeg/set"
(cd "$jpeg/tree" && zip -q -0 -r -X "$jpeg/jpeg.zip" .)
dropcaches
timed jpeg-index.aifs "$AIFS" index --quiet --view imagefolder "$jpeg/jpeg.zip" "$jpeg/zipset"
DIRS=("$jpeg/tree" "$RUN/mnt-packed" "$RUN/mnt-zip")
SYSTEMS=(ext4 packed zip)
mkdir "$RUN/mnt-packed" "$RUN/mnt-zip"
"$AIFS" mount "$jpeg/set" "$RUN/mnt-packed"
"$AIFS" mount "$jpeg/zipset" "$RUN/mnt-zip"
echo "== $FILES JPEGs ready after $((SECONDS - started)) s" >&2
for j in $JOBS; do
	for p in $(seq "$RUNS"); do
		out=$RUN/cold-$j-$p.json
		k=$(((p - 1) % ${#DIRS[@]}))
		"$AIFS" bench --json --drop-caches --relist --seed "$p" -j "$j" "${DIRS[@]:k}" "${DIRS[@]:0:k}" >"$out" ||
			{ cat "$out" >&2; die "cold-$j pass $p: aifs bench failed (a read error, or the systems served different bytes)"; }
		read -r -a v < <($PY -c 'import json,sys; print(*(round(p["files_per_s"], 1) for p in json.load(open(sys.argv[1]))["passes"]))' "$out")
		v=("${v[@]:${#v[@]}-k}" "${v[@]:0:${#v[@]}-k}") # back in the order of DIRS
		for i in "${!DIRS[@]}"; do echo "${v[i]}" >>"$RES/cold-$j.${SYSTEMS[i]}"; done
	done
	echo "== cold shuffled epochs with $j readers done after $((SECONDS - started)) s" >&2
done
meta seconds $((SECONDS - started))
meta load_end "$(cut -d' ' -f1-3 /proc/loadavg)"

# --- 3. the report ------------------------------------------------------------------------------
$PY - "$RES" "$OUT" <<'EOF'
import os
import statistics as st
import sys

res, out = sys.argv[1], sys.argv[2]
meta = dict(line.rstrip("\n").split("\t", 1) for line in open(os.path.join(res, "meta")))
fig = {}
for name in os.listdir(res):
    if name != "meta":
        case, system = name.rsplit(".", 1)
        fig[(case, system)] = [float(x) for x in open(os.path.join(res, name)).read().split()]
med = lambda c, s: st.median(fig[(c, s)])
ratio = lambda c, a, b: st.median(x / y for x, y in zip(fig[(c, a)], fig[(c, b)]))
rng = lambda c, s: f"{min(fig[(c, s)]):.2f}–{max(fig[(c, s)]):.2f}"
zips, members, runs = int(meta["ZIPS"]), int(meta["MEMBERS"]), int(meta["RUNS"])
r_idx = ratio("index", "aifs", "cat")
md = [
    "# ZIPs indexed in place (aifs index)",
    "",
    f"Measured by `sudo integration/bench/zips.sh` on {meta['date']} at commit {meta['commit']}, in "
    f"{int(meta['seconds']) // 60} min {int(meta['seconds']) % 60} s (ZIPS={zips}, MEMBERS={members}, "
    f"MEMBER_SIZE={meta['MEMBER_SIZE']}, FILES={meta['FILES']}, JOBS=\"{meta['JOBS']}\", RUNS={runs}).",
    "",
    f"**Machine:** {meta['machine']}; load average {meta['load']} at the start, {meta['load_end']} at the end."
    + (f" {meta['NOTE']}" if meta["NOTE"] else ""),
    "",
    f"Each figure is the median of {runs} passes (their range beside it); a ratio is the median of the "
    "passes' ratios. Everything lies on ext4 images loop-mounted with direct I/O on one disk, caches "
    "dropped before every timed command (cold).",
    "",
    f"## Index: {zips:,} ZIPs of {members:,} stored members ({zips * members:,} members, "
    f"{int(meta['zip_bytes']) / 1e9:.2f} GB)",
    "",
    "| command | seconds | CPU seconds | peak RSS |",
    "|---|---|---|---|",
    f"| `cat` of every ZIP | {med('index', 'cat'):.2f} ({rng('index', 'cat')}) | {med('cpu', 'cat'):.2f} | {med('rss', 'cat') / 1024:.0f} MiB |",
    f"| `aifs index` (CRC-32s of the central directories) | {med('index', 'aifs'):.2f} ({rng('index', 'aifs')}) | "
    f"{med('cpu', 'aifs'):.2f} | {med('rss', 'aifs') / 1024:.0f} MiB |",
    "",
    f"aifs index / cat: **{r_idx:.2f}** (target with checksums ≤ 1.2: **{'met' if r_idx <= 1.2 else 'missed'}**); "
    f"index {int(meta['index_bytes']) / 1e6:.1f} MB.",
    "",
    f"## Cold shuffled epochs: {int(meta['FILES']):,} JPEGs ({int(meta['jpeg_bytes']) / 1e9:.2f} GB), ext4, "
    "packed by aifs pack, and zipped (zip -0) through the imagefolder view",
    "",
    f"Pack {med('jpeg-pack', 'aifs'):.2f} s, index of the ZIP {med('jpeg-index', 'aifs'):.2f} s (cold).",
    "",
    "| readers | ext4 files/s | packed files/s | ZIP files/s | ZIP / packed | target |",
    "|---|---|---|---|---|---|",
]
for j in meta["JOBS"].split():
    c = f"cold-{j}"
    r = ratio(c, "zip", "packed")
    md.append(f"| {j} | {med(c, 'ext4'):,.0f} | {med(c, 'packed'):,.0f} | {med(c, 'zip'):,.0f} | **{r:.2f}** | ≥ 0.95: "
              f"**{'met' if r >= 0.95 else 'missed'}** |")
open(os.path.join(out, "zips.md"), "w").write("\n".join(md) + "\n")
with open(os.path.join(out, "zips.tsv"), "w") as f:
    f.write("figure\tsystem\tmedian\tpasses\n")
    for (c, s), v in sorted(fig.items()):
        f.write(f"{c}\t{s}\t{st.median(v)}\t{','.join(str(x) for x in v)}\n")
print("\n".join(md))
EOF
