#!/usr/bin/env bash
# restart.sh — what readers see when the daemon dies or is upgraded under them (issue 51,
# docs/reliability.md): one cold shuffled epoch of FILES files (~112 KB) by 8 Python reader
# threads through an aifs mount, on each data plane, without faults and then with the serving
# daemon killed (kill -9) at 30% and 60% of the epoch and upgraded (aifs upgrade) at 80%; every
# read is checked against the source. Prints a markdown table (files/s, errors, reads over
# 100 ms, the slowest read, p99, restarts); commits nothing. Needs root. About 2 minutes.
#
# Environment (defaults in brackets): FILES [6000]  WORKDIR [/var/tmp]
set -euo pipefail

FILES=${FILES:-6000}
WORKDIR=${WORKDIR:-/var/tmp}
NAME=restart
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

echo "== machine: $(machine)" >&2
ext4_dataset "$FILES" "$RUN/ext4"
mkdir -p "$RUN/mnt"
echo "| plane | faults | files/s | errors | reads > 100 ms | slowest read (ms) | p99 (ms) | restarts |"
echo "|---|---|---|---|---|---|---|---|"
for plane in fuse kernel; do
	for faults in none "kill -9 at 30% and 60%, upgrade at 80%"; do
		"$AIFS" mount -o "data=$plane" "$RUN/ext4/set" "$RUN/mnt"
		dropcaches
		args=()
		[[ $faults == none ]] || args=(--kill-at 0.3,0.6 --upgrade-at 0.8 --aifs "$AIFS")
		out=$($PY integration/bench/restart.py "$RUN/mnt" "$RUN/ext4/tree" "${args[@]}")
		$PY -c 'import json,sys; r=json.loads(sys.argv[1]); print("| %s | %s | %d | %d | %d | %.1f | %.1f | %d |" % (sys.argv[2], sys.argv[3], r["files_per_s"], r["errors"], r["reads_over_100ms"], r["max_ms"], r["p99_ms"], r["restarts"]))' "$out" "$plane" "$faults"
		[[ $($PY -c 'import json,sys; print(json.loads(sys.argv[1])["errors"])' "$out") == 0 ]] || echo "$out" >&2
		unmount_daemon "$RUN/mnt" "$(daemon_pid "$RUN/mnt")"
	done
done
