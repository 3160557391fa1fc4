#!/usr/bin/env bash
# ls.sh — the metadata path alone: `ls -lR` of a tree, warm (names and attributes cached after
# one untimed listing), native ext4 against the same tree packed and mounted with aifs, and with
# OLD_AIFS a second aifs build over the same set ("aifs before"), the systems in turn in each
# round. ls -l asks two extended attributes of every entry (security.selinux,
# system.posix_acl_access): a file system whose answer the kernel does not remember pays a
# round trip for each. Prints a markdown table (median seconds, ratio to ext4, FUSE requests
# and xattr requests the daemon saw per listing); commits nothing. Needs root (loop devices,
# mounts). About 2 minutes with the defaults.
#
# Environment (defaults in brackets):
#   FILES [20000]  RUNS [7]  WORKDIR [/var/tmp]  OLD_AIFS [empty: off]
set -euo pipefail

FILES=${FILES:-20000}
RUNS=${RUNS:-7}
WORKDIR=${WORKDIR:-/var/tmp}
OLD_AIFS=${OLD_AIFS:-}
[[ -z $OLD_AIFS ]] || OLD_AIFS=$(realpath -e "$OLD_AIFS") # lib.sh changes to the checkout
NAME=ls
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
RES=$RUN/res
mkdir -p "$RES"

echo "== machine: $(machine)" >&2
ext4_dataset "$FILES" "$RUN/ext4" --mean-size 4096 --sigma 0
systems=(ext4 aifs)
dirs=("$RUN/ext4/tree" "$RUN/aifs")
mkdir -p "$RUN/aifs"
"$AIFS" mount "$RUN/ext4/set" "$RUN/aifs"
if [[ -n $OLD_AIFS ]]; then
	mkdir -p "$RUN/old"
	"$OLD_AIFS" mount "$RUN/ext4/set" "$RUN/old"
	systems+=(aifs-before)
	dirs+=("$RUN/old")
fi

# requests MNT prints the requests the daemon at MNT has answered so far, all and xattr (the
# reading of the stats file costs a request or two, counted too: a fraction per listing).
requests() {
	$PY -c 'import json,sys; s=json.load(open(sys.argv[1]+"/.aifs/stats")); print(s["requests"], s["ops"]["xattr"]["count"])' "$1"
}

for d in "${dirs[@]}"; do ls -lR "$d" >/dev/null; done # warm
declare -A before
for i in "${!systems[@]}"; do
	[[ ${systems[i]} == ext4 ]] || before[$i]=$(requests "${dirs[i]}")
done
for _ in $(seq "$RUNS"); do
	for i in "${!systems[@]}"; do timed "${systems[i]}" ls -lR "${dirs[i]}" >/dev/null; done
done

base=$(median <"$RES/ext4")
echo "| system | ls -lR of $FILES files, warm (median of $RUNS, s) | × ext4 | FUSE requests a listing | of them xattr |"
echo "|---|---|---|---|---|"
for i in "${!systems[@]}"; do
	m=$(median <"$RES/${systems[i]}")
	reqs="—" xattr="—"
	if [[ ${systems[i]} != ext4 ]]; then
		read -r all0 x0 <<<"${before[$i]}"
		read -r all1 x1 <<<"$(requests "${dirs[i]}")"
		reqs=$(((all1 - all0) / RUNS)) xattr=$(((x1 - x0) / RUNS))
	fi
	echo "| ${systems[i]} | $m | $(ratio "$m" "$base") | $reqs | $xattr |"
done
