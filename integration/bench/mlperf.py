"""The simulated accelerators of mlperf.sh: DLIO's PyTorch training loop, written for this harness.

usage:
  mlperf.py gen resnet50|retinanet FILES DIR
  mlperf.py run --root DIR --sampler dlio|torch|plan --n N --batch B --step SECONDS
                --threads T --epochs E --warmup W --record BYTES --decode raw|pil [--seed S]
  mlperf.py roundtrip PROCS PASSES DIR...   (the cost of a FUSE round trip: warm files of each DIR)
  mlperf.py record FILE KEY=VALUE...   (stdin: one run's JSON; appends it, with the fields, to FILE)

`gen` writes an ImageFolder-like tree of FILES files, 100 to a class folder: for resnet50, files of
RESNET50_RECORD random bytes (MLPerf Storage's OPEN shape: one file a sample, read raw); for
retinanet, JPEGs of RETINANET_RECORD bytes (a grayscale noise image, as DLIO's JPEG generator
makes, padded after its end marker to the record length; PIL ignores the padding).

`run` is one measurement: N processes, the simulated accelerators (ranks), forked from this one
after it has listed the tree. Each rank iterates its own DataLoader(batch_size=B, num_workers=T,
prefetch_factor=2, persistent_workers=True, drop_last=True) over the tree for W + E epochs, with
one of three samplers: dlio (DLIO's index map, `dlio_indices`), torch
(torch.utils.data.DistributedSampler) or plan (aifs_plan.DistributedSampler, every rank on one
node, LOCAL_WORLD_SIZE=N, as torchrun sets it on one host). A worker reads each sample whole
(raw: open().read(); pil: PIL decode to a numpy array, as DLIO's image reader does) and hands
back its byte count only, so that collating a batch costs nothing the storage is not measured by.
After each batch a rank sleeps the step time (the accelerator's compute), then waits at a barrier
of all ranks, as DLIO's _train does after each step. Every rank takes `steps_per_epoch` steps an
epoch, so that no rank waits at the barrier for one that has run out of samples.

The barrier is a multiprocessing.Barrier (a semaphore in shared memory), not torch.distributed:
the ranks share one host, where a gloo barrier, a TCP exchange through the loopback, would cost
each of 2 cores CPU every step that the readers need, with the same semantics.

`run` prints one JSON object: the run's knobs and, for each epoch, the AU and throughput
(`epoch_metrics`) and the bytes read, the peak memory of the memory cgroup it runs in
(`cgroup_memory`) at the end of each epoch, and the CPU and faults of the ranks and of their
workers over the epoch (USAGE_KEYS, summed over the ranks), and the machine's busy CPU seconds
over the epoch (machine_busy: every process and the kernel, all CPUs).

`roundtrip` measures what one FUSE request costs the machine (see its doc): the report's bound of
the FUSE plane is the kernel plane's busy CPU a sample (ext4's where the run has no kernel plane)
plus the FUSE plane's requests a sample at that cost.
"""

import json
import math
import os
import random
import statistics
import sys
import time

# MLPerf Storage's record lengths (bytes a sample) of the two workloads.
RESNET50_RECORD = 114660
RETINANET_RECORD = 322957
# The side of the noise image of a retinanet JPEG: its JPEG (quality 75) is just under the record.
RETINANET_SIDE = 760
# How many different noise images the retinanet files are cut from (each file also differs in its
# padding): enough that no two files in a batch decode the same pixels.
RETINANET_IMAGES = 16
FILES_PER_CLASS = 100


# --- the arithmetic, pure and tested (test_mlperf.py) ------------------------------------------

def dlio_indices(samples, world, rank, seed, epoch):
    """DLIO's index map: rank `rank` of `world` owns the block [rank·⌈S/N⌉, (rank+1)·⌈S/N⌉) of the
    S = `samples` indices (the last block is cut at S), shuffled each epoch with seed + epoch."""
    per = -(-samples // world)
    block = list(range(min(rank * per, samples), min((rank + 1) * per, samples)))
    random.Random(seed + epoch).shuffle(block)
    return block


def steps_per_epoch(samples, world, batch, rank_lengths):
    """The steps every rank takes an epoch: DLIO's ⌊S / B / N⌋, and no more than the rank with the
    fewest samples has full batches for (`rank_lengths`: each rank's samples an epoch)."""
    return min(samples // batch // world, min(rank_lengths) // batch)


def rank_metrics(compute, first, wall, batch):
    """One rank's epoch, as DLIO's statscounter counts it: `compute` is each step's measured
    compute (sleep) time, `first` the first step's time (its load and compute), `wall` the
    epoch's time from the loader's start to the end of the last step. The first step is left
    out (the loader's start-up): AU = Σ compute of steps 2.. / (wall − first), and samples/s =
    (steps − 1)·B / (wall − first). Returns (au, samples_per_s); (0, 0) for fewer than 2 steps."""
    window = wall - first
    if len(compute) < 2 or window <= 0:
        return 0.0, 0.0
    return sum(compute[1:]) / window, (len(compute) - 1) * batch / window


def epoch_metrics(ranks, batch, record):
    """Combines the ranks' epochs (dicts of compute, first, wall): the AU is the ranks' mean
    weighted by their steps (DLIO's end_train), samples/s their sum, MiB/s that × `record` bytes
    / 2^20. Returns a dict of au, samples_per_s, mib_per_s, steps."""
    aus, rates, steps = [], [], []
    for r in ranks:
        au, rate = rank_metrics(r["compute"], r["first"], r["wall"], batch)
        aus.append(au)
        rates.append(rate)
        steps.append(len(r["compute"]))
    total = sum(steps)
    au = sum(a * s for a, s in zip(aus, steps)) / total if total else 0.0
    rate = sum(rates)
    return {"au": au, "samples_per_s": rate, "mib_per_s": rate * record / 2**20, "steps": steps[0] if steps else 0}


def largest_n(points, floor):
    """The sweep's answer: the largest N whose AU (the median over its epochs) is at least
    `floor`, from `points` {N: au}; 0 when none is."""
    return max((n for n, au in points.items() if au >= floor), default=0)


def median_measured(epochs, key):
    """The median of `key` over the epochs after the warm-up."""
    return statistics.median(e[key] for e in epochs if not e["warmup"])


def roundtrip_us(base_us, fuse_us, requests):
    """The measured cost of one FUSE round trip, in µs of the machine's busy CPU: the same warm
    files read by the same readers cost `fuse_us` a file through the FUSE mount and `base_us` on
    ext4, and each made `requests` FUSE requests; None without requests."""
    return (fuse_us - base_us) / requests if requests else None


def cpu_bound(cpus, base_us, requests, rt_us):
    """The most samples/s a system can feed on `cpus` CPUs that does at least a base system's work a
    sample (`base_us` µs of busy CPU) and also pays `requests` round trips of `rt_us` each a sample."""
    return cpus * 1e6 / (base_us + requests * rt_us)


# --- the dataset --------------------------------------------------------------------------------

def listing(root):
    """The tree's samples as ImageFolder lists them: (path, class index), classes in sorted order,
    each class's files in sorted order."""
    classes = sorted(e.name for e in os.scandir(root) if e.is_dir())
    return [(os.path.join(root, c, f), i) for i, c in enumerate(classes)
            for f in sorted(os.listdir(os.path.join(root, c)))]


class Files:
    """An ImageFolder-like dataset (`root`, `samples`, as aifs_plan reads them) whose item is the
    byte count of a sample read whole (raw) or the bytes of its decoded pixels (pil)."""

    def __init__(self, root, decode):
        self.root, self.decode = root, decode
        self.samples = listing(root)

    def __len__(self):
        return len(self.samples)

    def __getitem__(self, i):
        path = self.samples[i][0]
        if self.decode == "pil":
            import numpy
            from PIL import Image

            with Image.open(path) as im:
                return numpy.asarray(im).nbytes
        with open(path, "rb") as f:
            return len(f.read())


def generate(workload, files, root):
    """Writes the tree of `gen`."""
    rng = random.Random(files)
    jpegs = _noise_jpegs(rng) if workload == "retinanet" else None
    for i in range(files):
        d = os.path.join(root, f"c{i // FILES_PER_CLASS:05d}")
        if i % FILES_PER_CLASS == 0:
            os.makedirs(d, exist_ok=True)
        if jpegs is None:
            name, data = f"{i:08d}.bin", os.urandom(RESNET50_RECORD)
        else:
            head = jpegs[i % len(jpegs)]
            name, data = f"{i:08d}.jpg", head + os.urandom(RETINANET_RECORD - len(head))
        with open(os.path.join(d, name), "wb") as f:
            f.write(data)


def _noise_jpegs(rng):
    import io

    import numpy
    from PIL import Image

    out = []
    for k in range(RETINANET_IMAGES):
        pixels = numpy.random.default_rng(rng.randrange(1 << 30)).integers(0, 256, (RETINANET_SIDE, RETINANET_SIDE), dtype=numpy.uint8)
        b = io.BytesIO()
        Image.fromarray(pixels).save(b, format="JPEG")
        if b.tell() > RETINANET_RECORD:
            raise SystemExit(f"mlperf.py: a noise JPEG of {RETINANET_SIDE}² is {b.tell()} bytes, over the record length")
        out.append(b.getvalue())
    return out


# --- the run -------------------------------------------------------------------------------------

class DlioSampler:
    """`dlio_indices` as a torch Sampler (set_epoch reshuffles)."""

    def __init__(self, samples, world, rank, seed):
        self.samples, self.world, self.rank, self.seed, self.epoch = samples, world, rank, seed, 0

    def __iter__(self):
        return iter(dlio_indices(self.samples, self.world, self.rank, self.seed, self.epoch))

    def __len__(self):
        return len(dlio_indices(self.samples, self.world, self.rank, self.seed, 0))

    def set_epoch(self, epoch):
        self.epoch = epoch


class TimedSampler:
    """Wraps a sampler and adds the seconds its __iter__ takes (where aifs_plan builds the
    epoch's order and sends the plan, in the rank's main process) to `spent`."""

    def __init__(self, sampler):
        self.sampler, self.spent = sampler, 0.0

    def __iter__(self):
        t0 = time.perf_counter()
        it = iter(self.sampler)
        self.spent += time.perf_counter() - t0
        return it

    def __len__(self):
        return len(self.sampler)

    def set_epoch(self, epoch):
        self.sampler.set_epoch(epoch)


def make_sampler(kind, dataset, world, rank, seed):
    if kind == "dlio":
        return DlioSampler(len(dataset), world, rank, seed)
    if kind == "torch":
        from torch.utils.data import DistributedSampler

        return DistributedSampler(dataset, num_replicas=world, rank=rank, shuffle=True, seed=seed)
    if kind == "plan":
        sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
        from aifs import plan as aifs_plan

        return aifs_plan.DistributedSampler(dataset, num_replicas=world, rank=rank, shuffle=True, seed=seed,
                                            local_world_size=world)
    raise SystemExit(f"mlperf.py: unknown sampler {kind}")


def cgroup_memory():
    """The memory cgroup this process is in (v1 or v2): its limit, peak use, and what its
    processes hold themselves (anonymous memory and mapped files: libraries, torch's), in bytes,
    and since its making the major faults of its processes and the file pages read again after
    their eviction (refault_file); None outside a limited cgroup."""
    try:
        with open("/proc/self/cgroup") as f:
            lines = f.read().splitlines()
    except OSError:
        return None
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if controllers == "memory":
            d = "/sys/fs/cgroup/memory" + path
            files = ("memory.limit_in_bytes", "memory.max_usage_in_bytes", "total_rss", "total_mapped_file",
                     "total_pgmajfault", "total_workingset_refault_file")
            break
        if controllers == "" and os.path.exists("/sys/fs/cgroup/cgroup.controllers"):
            d = "/sys/fs/cgroup" + path
            files = ("memory.max", "memory.peak", "anon", "file_mapped", "pgmajfault", "workingset_refault_file")
    else:
        return None
    try:
        with open(os.path.join(d, files[0])) as f:
            limit = f.read().strip()
        with open(os.path.join(d, files[1])) as f:
            peak = int(f.read())
        with open(os.path.join(d, "memory.stat")) as f:
            stat = dict(line.split() for line in f)
    except (OSError, ValueError):
        return None
    if limit == "max" or int(limit) >= 1 << 60:
        return None
    return {"limit": int(limit), "peak": peak, "anon": int(stat[files[2]]), "mapped": int(stat[files[3]]),
            "majfault": int(stat.get(files[4], 0)), "refault_file": int(stat.get(files[5], 0))}


def machine_busy():
    """The machine's busy CPU seconds so far, all CPUs, every process and the kernel: /proc/stat's
    user, nice, system, irq and softirq (not idle, iowait or steal)."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:8]]
    return (v[0] + v[1] + v[2] + v[5] + v[6]) / os.sysconf("SC_CLK_TCK")


def proc_usage(pid):
    """A process's usage so far, from /proc/PID/stat: (user CPU seconds, system CPU seconds,
    minor faults, major faults); zeros when it cannot be read (the process has exited)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return (0.0, 0.0, 0, 0)
    # fields[k] is field k + 3 of proc(5): minflt 10, majflt 12, utime 14, stime 15.
    tck = os.sysconf("SC_CLK_TCK")
    return (int(fields[11]) / tck, int(fields[12]) / tck, int(fields[7]), int(fields[9]))


def loader_usage(loader):
    """proc_usage of the rank's main process followed by proc_usage summed over its loader's
    workers (their processes are the iterator's, kept by persistent_workers), as one tuple."""
    workers = getattr(getattr(loader, "_iterator", None), "_workers", None) or []
    ws = [proc_usage(w.pid) for w in workers]
    return proc_usage(os.getpid()) + tuple(sum(w[k] for w in ws) for k in range(4))


# What each epoch sums over the ranks (rank_main, in loader_usage's order): user and system CPU
# seconds, minor and major faults of the ranks' main processes and of their loaders' workers.
USAGE_KEYS = ("main_user_s", "main_sys_s", "main_minflt", "main_majflt",
              "worker_user_s", "worker_sys_s", "worker_minflt", "worker_majflt")


def rank_main(rank, args, dataset, barrier, results):
    import torch
    from torch.utils.data import DataLoader

    torch.set_num_threads(1)
    t0 = time.perf_counter()
    sampler = TimedSampler(make_sampler(args["sampler"], dataset, args["n"], rank, args["seed"]))
    setup = time.perf_counter() - t0
    workers = args["threads"]
    loader = DataLoader(dataset, batch_size=args["batch"], sampler=sampler, num_workers=workers,
                        prefetch_factor=2 if workers else None, persistent_workers=workers > 0, drop_last=True)
    steps, step_s = args["steps"], args["step"]
    for epoch in range(args["warmup"] + args["epochs"]):
        sampler.set_epoch(epoch)
        spent = sampler.spent
        u0 = loader_usage(loader)
        barrier.wait()
        compute, first, nbytes = [], None, 0
        b0 = machine_busy()
        t0 = time.perf_counter()
        for batch in loader:
            nbytes += int(batch.sum())
            c0 = time.perf_counter()
            if step_s > 0:
                time.sleep(step_s)
            c1 = time.perf_counter()
            compute.append(c1 - c0)
            if first is None:
                first = c1 - t0
            barrier.wait()
            if len(compute) == steps:
                break
        wall = time.perf_counter() - t0
        busy = machine_busy() - b0
        u1 = loader_usage(loader)  # the workers start with the first epoch: u0 counts none of them
        results.put((rank, epoch, {"compute": compute, "first": first or 0.0, "wall": wall, "bytes": nbytes,
                                   "sampler_s": sampler.spent - spent, "setup_s": setup, "busy_s": busy,
                                   **{k: b - a for k, a, b in zip(USAGE_KEYS, u0, u1)}}))


def run(args):
    import multiprocessing as mp

    dataset = Files(args["root"], args["decode"])
    n = args["n"]
    if args["sampler"] == "dlio":
        lengths = [len(dlio_indices(len(dataset), n, r, 0, 0)) for r in range(n)]
    else:
        lengths = [-(-len(dataset) // n)] * n  # torch's and aifs_plan's: ⌈S/N⌉ each, padded
    args["steps"] = steps_per_epoch(len(dataset), n, args["batch"], lengths)
    if args["steps"] < 2:
        raise SystemExit(f"mlperf.py: {len(dataset)} samples give {args['steps']} steps of {args['batch']} "
                         f"an epoch at N={n}; at least 2 are needed (the first is left out)")
    ctx = mp.get_context("fork")
    barrier = ctx.Barrier(n, timeout=600)
    results = ctx.Queue()
    procs = [ctx.Process(target=rank_main, args=(r, args, dataset, barrier, results)) for r in range(n)]
    for p in procs:
        p.start()
    total = args["warmup"] + args["epochs"]
    got = {}
    epochs = []
    while len(epochs) < total:
        try:
            rank, epoch, rec = results.get(timeout=5)
        except Exception:  # queue.Empty: see whether a rank died
            dead = [p for p in procs if p.exitcode not in (None, 0)]
            if dead:
                for p in procs:
                    p.kill()
                why = " (killed: by the memory cgroup's OOM killer?)" if dead[0].exitcode == -9 else ""
                raise SystemExit(f"mlperf.py: rank {procs.index(dead[0])} exited with {dead[0].exitcode}{why}")
            continue
        got.setdefault(epoch, {})[rank] = rec
        if len(got[epoch]) == n:
            ranks = [got[epoch][r] for r in range(n)]
            m = epoch_metrics(ranks, args["batch"], args["record"])
            m.update(epoch=epoch, warmup=epoch < args["warmup"], bytes=sum(r["bytes"] for r in ranks),
                     sampler_s=max(r["sampler_s"] for r in ranks), sampler_setup_s=max(r["setup_s"] for r in ranks),
                     wall=max(r["wall"] for r in ranks), samples=n * m["steps"] * args["batch"],
                     busy_s=max(r["busy_s"] for r in ranks),
                     **{k: sum(r[k] for r in ranks) for k in USAGE_KEYS},
                     cgroup=cgroup_memory())
            epochs.append(m)
    for p in procs:
        p.join()
        if p.exitcode:
            raise SystemExit(f"mlperf.py: a rank exited with {p.exitcode}")
    out = {k: args[k] for k in ("sampler", "n", "batch", "step", "threads", "record", "decode", "steps")}
    out.update(files=len(dataset), cpus=os.cpu_count(), epochs=sorted(epochs, key=lambda e: e["epoch"]))
    json.dump(out, sys.stdout)
    print()


def read_whole(paths):
    """Opens and reads each path whole, one at a time, as a DataLoader's worker does (pil_loader's
    open() and read()); returns the bytes read."""
    n = 0
    for p in paths:
        with open(p, "rb") as f:
            n += len(f.read())
    return n


def requests_of(root):
    """The FUSE requests that the aifs mount at `root` has answered so far (its .aifs/stats); None
    where root is no aifs FUSE mount."""
    try:
        with open(os.path.join(root, ".aifs", "stats")) as f:
            return json.load(f)["requests"]
    except (OSError, ValueError, KeyError):
        return None


def roundtrip(procs, passes, roots):
    """What a FUSE round trip costs on this machine: warm files read whole by `procs` processes,
    each root in turn after one untimed epoch of each, `passes` shuffled epochs. Prints one JSON
    object a root: its files/s, the machine's busy CPU µs a file (machine_busy) and, for an aifs
    FUSE mount, the requests a file, each the median over the passes. On Python before 3.14 every
    open() of a warm file asks ioctl(TCGETS), which FUSE passes to the daemon: the round trip
    that ext4 does not pay (roundtrip_us)."""
    import multiprocessing as mp

    lists = [[p for p, _ in listing(r)] for r in roots]
    with mp.get_context("fork").Pool(procs) as pool:
        for paths in lists:
            pool.map(read_whole, [paths[i::procs] for i in range(procs)])
        got = [[] for _ in roots]
        for k in range(passes):
            for root, paths, out in zip(roots, lists, got):
                order = paths[:]
                random.Random(k).shuffle(order)
                q0, b0, t0 = requests_of(root), machine_busy(), time.perf_counter()
                pool.map(read_whole, [order[i::procs] for i in range(procs)])
                t1, b1, q1 = time.perf_counter(), machine_busy(), requests_of(root)
                out.append((len(order) / (t1 - t0), (b1 - b0) * 1e6 / len(order),
                            None if q0 is None or q1 is None else (q1 - q0) / len(order)))
    for root, paths, out in zip(roots, lists, got):
        reqs = [o[2] for o in out if o[2] is not None]
        print(json.dumps({"root": root, "files": len(paths), "procs": procs, "passes": passes,
                          "files_per_s": statistics.median(o[0] for o in out),
                          "busy_us_per_file": statistics.median(o[1] for o in out),
                          "requests_per_file": statistics.median(reqs) if reqs else None}))


def parse_run(argv):
    import argparse

    p = argparse.ArgumentParser(prog="mlperf.py run")
    p.add_argument("--root", required=True)
    p.add_argument("--sampler", choices=("dlio", "torch", "plan"), default="dlio")
    p.add_argument("--n", type=int, required=True)
    p.add_argument("--batch", type=int, required=True)
    p.add_argument("--step", type=float, required=True)
    p.add_argument("--threads", type=int, required=True)
    p.add_argument("--epochs", type=int, required=True)
    p.add_argument("--warmup", type=int, default=1)
    p.add_argument("--record", type=int, required=True)
    p.add_argument("--decode", choices=("raw", "pil"), default="raw")
    p.add_argument("--seed", type=int, default=0)
    return vars(p.parse_args(argv))


# The sections of an aifs mount's stats (.aifs/stats) that `record` keeps with a run: what the
# daemon read, read ahead, pushed, refused and dropped, and its page-cache budget.
STATS_KEPT = ("requests", "read_bytes", "cache", "backend", "prefetch", "plan_readahead", "epoch", "page_cache")


def stats_digest(stats):
    """The part of an aifs mount's stats kept with a run: STATS_KEPT, and each FUSE op's count."""
    out = {k: stats[k] for k in STATS_KEPT if k in stats}
    if "ops" in stats:
        out["ops"] = {op: v["count"] for op, v in stats["ops"].items() if v.get("count")}
    return out


def record(path, fields):
    """Appends the JSON object on stdin to `path` as one line, with the KEY=VALUE fields added
    (numbers where they parse as numbers; KEY=@FILE: the digest of the aifs stats in FILE,
    stats_digest)."""
    obj = json.load(sys.stdin)
    for f in fields:
        k, v = f.split("=", 1)
        if v.startswith("@"):
            with open(v[1:]) as s:
                obj[k] = stats_digest(json.load(s))
            continue
        try:
            obj[k] = int(v)
        except ValueError:
            try:
                obj[k] = float(v)
            except ValueError:
                obj[k] = v
    with open(path, "a") as out:
        out.write(json.dumps(obj) + "\n")


def main(argv):
    if len(argv) >= 4 and argv[0] == "gen":
        generate(argv[1], int(argv[2]), argv[3])
    elif argv[:1] == ["run"]:
        run(parse_run(argv[1:]))
    elif len(argv) >= 4 and argv[0] == "roundtrip":
        roundtrip(int(argv[1]), int(argv[2]), argv[3:])
    elif len(argv) >= 2 and argv[0] == "record":
        record(argv[1], argv[2:])
    else:
        raise SystemExit(__doc__)


if __name__ == "__main__":
    main(sys.argv[1:])
