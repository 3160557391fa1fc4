"""restart.py — one shuffled epoch over an aifs mount, 8 reader threads, while the daemon is
killed (kill -9) or upgraded at given points of the epoch (integration/bench/restart.sh).

Each read (open, read to the end, close) is timed and checked against the CRC-32 of the same
file in the source tree. Prints one JSON object: files, seconds, files/s, errors, reads slower
than 100 ms, the slowest read and the 99th percentile (ms), and the daemon's restarts.

usage: restart.py MNT TREE [--kill-at F,F] [--upgrade-at F] [--aifs BIN] [--jobs 8] [--seed 1]
"""
import argparse
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
import zlib


def stats_path(mnt):
    own = os.path.join(mnt, ".aifs", "stats")
    if os.path.exists(own):
        return own
    st = os.stat(mnt)
    return "/run/aifs/%d:%d/.aifs/stats" % (os.major(st.st_dev), os.minor(st.st_dev))


def daemon(mnt):
    with open(stats_path(mnt)) as f:
        return json.load(f)["daemon"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("mnt")
    ap.add_argument("tree")
    ap.add_argument("--kill-at", default="")
    ap.add_argument("--upgrade-at", type=float, default=None)
    ap.add_argument("--aifs", default="aifs")
    ap.add_argument("--jobs", type=int, default=8)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()

    paths = []
    for root, _, files in os.walk(a.tree):
        for name in files:
            paths.append(os.path.relpath(os.path.join(root, name), a.tree))
    paths.sort()
    want = {}
    for p in paths:
        with open(os.path.join(a.tree, p), "rb") as f:
            want[p] = zlib.crc32(f.read())
    random.Random(a.seed).shuffle(paths)

    events = [(float(x), "kill") for x in a.kill_at.split(",") if x]
    if a.upgrade_at is not None:
        events.append((a.upgrade_at, "upgrade"))
    events.sort()

    lock = threading.Lock()
    nxt = [0]
    lat, errors = [], []

    def reader():
        while True:
            with lock:
                i = nxt[0]
                nxt[0] += 1
            if i >= len(paths):
                return
            p = paths[i]
            t0 = time.perf_counter()
            try:
                with open(os.path.join(a.mnt, p), "rb") as f:
                    b = f.read()
                ok = zlib.crc32(b) == want[p]
                err = None if ok else "%s: wrong bytes" % p
            except OSError as e:
                err = "%s: %s" % (p, e)
            took = time.perf_counter() - t0
            with lock:
                lat.append(took)
                if err:
                    errors.append(err)

    begin = time.perf_counter()
    threads = [threading.Thread(target=reader) for _ in range(a.jobs)]
    for t in threads:
        t.start()
    for at, what in events:
        while nxt[0] < at * len(paths) and any(t.is_alive() for t in threads):
            time.sleep(0.005)
        if what == "kill":
            os.kill(daemon(a.mnt)["pid"], signal.SIGKILL)
        else:
            subprocess.run([a.aifs, "upgrade", a.mnt], check=True, stdout=subprocess.DEVNULL)
    for t in threads:
        t.join()
    secs = time.perf_counter() - begin
    lat.sort()
    print(json.dumps({
        "files": len(lat), "seconds": round(secs, 3), "files_per_s": round(len(lat) / secs),
        "errors": len(errors), "first_errors": errors[:3],
        "reads_over_100ms": sum(1 for x in lat if x > 0.1),
        "max_ms": round(lat[-1] * 1000, 1), "p99_ms": round(lat[int(len(lat) * 0.99)] * 1000, 1),
        "restarts": daemon(a.mnt).get("restarts", 0),
    }))


if __name__ == "__main__":
    sys.exit(main())
