#!/usr/bin/env bash
# random_access.sh — random 4 KiB reads of one large file, native ext4 against aifs, side by
# side in one run on one disk (the real-programs issue, item 2): Python's default buffered
# open() (seek + read), os.pread and a numpy memmap, each N reads at random 4 KiB-aligned
# offsets of a SIZE_MIB file of random bytes, cold (every cache dropped first) and warm (the
# same offsets again). The file lives on an ext4 image on a direct-I/O loop device, beside its
# shard set, which aifs mounts. The floor is aifs over a copy of the set in tmpfs (no disk read:
# what a READ's FUSE round trip costs on this machine), so that ext4 + floor is the bound for a
# cold read that must cross FUSE: a 4 KiB read costs one READ on any FUSE file system (FUSE
# passthrough cannot map a file to an extent at an offset of a shard). With OLD_AIFS=path, a second aifs build (say, one from before a
# change) mounts the same set and runs beside them. Rounds interleave the systems; a ratio is the
# median over the rounds of aifs's time over ext4's in the same round (above 1: aifs slower).
# Prints a markdown table; commits nothing. Needs root.
#
# Environment (defaults in brackets):
#   SIZE_MIB [1024]   N [1000]   ROUNDS [5]   OLD_AIFS []   WORKDIR [/var/tmp]
set -euo pipefail

SIZE_MIB=${SIZE_MIB:-1024}
N=${N:-1000}
ROUNDS=${ROUNDS:-5}
OLD_AIFS=${OLD_AIFS:-}
WORKDIR=${WORKDIR:-/var/tmp}
NAME=random_access
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
need_packages python3-numpy

echo "== machine: $(machine)" >&2
fs_image ext4 $((SIZE_MIB * 2 + 512)) "$RUN/ext4"
mkdir "$RUN/ext4/tree"
head -c "$((SIZE_MIB << 20))" /dev/urandom >"$RUN/ext4/tree/big.bin"
"$AIFS" pack --quiet "$RUN/ext4/tree" "$RUN/ext4/set"
mkdir "$RUN/aifs"
"$AIFS" mount "$RUN/ext4/set" "$RUN/aifs"
mkdir "$RUN/tmpfs" "$RUN/floor"
mount -t tmpfs -o size=$((SIZE_MIB + 256))m tmpfs "$RUN/tmpfs"
cp -r "$RUN/ext4/set" "$RUN/tmpfs/set"
"$AIFS" mount "$RUN/tmpfs/set" "$RUN/floor"
systems="ext4=$RUN/ext4/tree aifs=$RUN/aifs floor=$RUN/floor"
if [[ -n $OLD_AIFS ]]; then
	mkdir "$RUN/old"
	"$OLD_AIFS" mount "$RUN/ext4/set" "$RUN/old"
	systems="$systems old=$RUN/old"
fi

# One line per run: HOW STATE SYSTEM ROUND SECONDS.
results="$RUN/results"
for round in $(seq "$ROUNDS"); do
	for how in open pread memmap; do
		for sys in $systems; do
			name=${sys%%=*} dir=${sys#*=}
			dropcaches
			cold=$($PY "$REPO/integration/bench/random_access.py" "$dir/big.bin" "$how" "$N" "$round")
			warm=$($PY "$REPO/integration/bench/random_access.py" "$dir/big.bin" "$how" "$N" "$round")
			echo "$how cold $name $round $cold" >>"$results"
			echo "$how warm $name $round $warm" >>"$results"
		done
	done
	echo "round $round of $ROUNDS done" >&2
done

# ms HOW STATE SYSTEM: the median time of the N reads in ms; per_round_ratio HOW STATE A B: the
# median over rounds of A's time over B's.
ms() { awk -v h="$1" -v s="$2" -v n="$3" '$1 == h && $2 == s && $3 == n { print $5 * 1000 }' "$results" | median; }
per_round_ratio() {
	awk -v h="$1" -v s="$2" -v a="$3" -v b="$4" '$1 == h && $2 == s && $3 == a { ta[$4] = $5 }
		$1 == h && $2 == s && $3 == b { tb[$4] = $5 }
		END { for (r in ta) if (tb[r] > 0) printf "%.4f\n", ta[r] / tb[r] }' "$results" | median
}

# bound_ratio HOW STATE: the median over rounds of aifs's time over ext4's plus the floor's.
bound_ratio() {
	awk -v h="$1" -v s="$2" '$1 == h && $2 == s { t[$3, $4] = $5; r[$4] = 1 }
		END { for (i in r) if (t["ext4", i] + t["floor", i] > 0) printf "%.4f\n", t["aifs", i] / (t["ext4", i] + t["floor", i]) }' "$results" | median
}

echo "Random 4 KiB reads of a $SIZE_MIB MiB file, $N reads a run, median of $ROUNDS rounds (ms for the $N reads; ratio: aifs time / ext4 time, median of the rounds' ratios; floor: aifs over tmpfs, the FUSE round trips alone; bound: ext4 + floor):"
echo
header="| reads | cache | ext4 ms | aifs ms | aifs/ext4 | floor ms | aifs/bound |"
rule="|---|---|---|---|---|---|---|"
if [[ -n $OLD_AIFS ]]; then
	header="$header old aifs ms | old/ext4 |"
	rule="$rule---|---|"
fi
echo "$header"
echo "$rule"
for how in open pread memmap; do
	for state in cold warm; do
		line="| $how | $state | $(ms "$how" "$state" ext4) | $(ms "$how" "$state" aifs) | $(per_round_ratio "$how" "$state" aifs ext4) | $(ms "$how" "$state" floor) | $(bound_ratio "$how" "$state") |"
		if [[ -n $OLD_AIFS ]]; then
			line="$line $(ms "$how" "$state" old) | $(per_round_ratio "$how" "$state" old ext4) |"
		fi
		echo "$line"
	done
done
