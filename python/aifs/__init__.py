"""aifs's Python side: plans for PyTorch samplers (aifs.plan), direct reads from the shards
(aifs.direct), the data stall of a job (aifs.stall), and the protocol check between this
package and a mount.

`aifs.DistributedSampler` and `aifs.PlanSampler` are aifs.plan's (they need torch, imported on
first use); aifs.direct needs only the standard library.
"""

import json
import os

__all__ = ["__version__", "PLAN_PROTOCOL", "ProtocolError", "check_protocol", "stall", "Stall", "cgroup",
           "DistributedSampler", "PlanSampler"]

with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "VERSION"), encoding="ascii") as _f:
    # The release, shared with the Go binary (which embeds the same file; `aifs stats` shows it).
    __version__ = _f.read().strip()

# The plan protocol version this package speaks: the number in the plan's header line, and the
# stats file's "plan_protocol" (Go: plan.Protocol).
PLAN_PROTOCOL = 1


class ProtocolError(RuntimeError):
    """The mount speaks another plan protocol version than this package."""


def check_protocol(mount_root):
    """Raises ProtocolError unless the aifs mount at `mount_root` takes plans of PLAN_PROTOCOL.

    Reads "plan_protocol" from the mount's stats file; a daemon whose stats file has none (one
    older than the field) speaks version 1. OSError from reading the stats file propagates.
    """
    stats = _read_stats(mount_root)
    theirs = stats.get("plan_protocol", 1)
    if theirs != PLAN_PROTOCOL:
        raise ProtocolError(
            f"aifs: the mount at {mount_root} speaks plan protocol {theirs} (daemon "
            f"{stats.get('version', 'before 0.1.0')}), this Python package {PLAN_PROTOCOL} "
            f"(aifs {__version__}): install the package from the same release as the daemon "
            "(pip install --no-build-isolation ./python)")


def _read_stats(mount_root):
    from aifs import direct

    with open(os.path.join(direct.control_root(mount_root), ".aifs", "stats"), "rb") as f:
        return json.load(f)


class Stall:
    """Measures the data stall of a job's readers on one aifs mount, lap by lap (say, an epoch).

    `lap()` returns the share of the readers' time since the previous lap (or since the Stall
    was made) that they spent blocked in aifs: the growth of the job's blocked seconds divided
    by the wall time times `readers` (the processes reading: a DataLoader's num_workers, or 1
    without workers). What a blocked second is depends on the mount's data plane, named by
    `source` (docs/plan.md, "Data stall"): "fuse", time in LOOKUP, GETATTR, OPEN and READ
    summed over requests; "delayacct" (the kernel plane with kernel.task_delayacct=1), the
    readers' block-I/O delay; "psi" (the kernel plane without it), the machine's I/O pressure,
    a share of wall time (not divided by `readers`) and the same for every job.

    `job` says whose reads count:
      - "tree" (the default): this process and its descendants, such as its DataLoader's
        workers. Workers that exit (at each epoch's end, without persistent_workers) still
        count: the daemon folds an exited reader's figures into each of its ancestors.
      - "cgroup": every process in this process's cgroup (the v1 memory controller's where it
        is on cgroup v1, else the cgroup v2 path; aifs.cgroup() says which).
      - a cgroup path, such as "/kubepods/pod1/c2": that cgroup's readers.
      - "mount": every reader of the mount, as before jobs were told apart.

    The daemon tells "tree" and "cgroup" apart by the process that reads the stats file, so
    make the Stall and call lap() in the training process.

        s = aifs.stall("/mnt/aifs", readers=8)
        for epoch in range(epochs):
            train_one_epoch()
            print(f"data stall {s.lap():.1%}")
    """

    def __init__(self, mountpoint, readers=1, *, job="tree", clock=None):
        import time

        if readers < 1:
            raise ValueError(f"aifs.stall: readers {readers} must be >= 1")
        if not isinstance(job, str) or not (job in ("tree", "cgroup", "mount") or job.startswith("/")):
            raise ValueError(f"aifs.stall: job {job!r} must be 'tree', 'cgroup', 'mount' or a cgroup path")
        self.mountpoint, self.readers, self.job = mountpoint, readers, job
        self.source = None
        self._clock = clock or time.monotonic
        self._blocked, self._t = self.blocked_seconds(), self._clock()

    def blocked_seconds(self):
        """Returns the job's blocked seconds now (the mount's stall.blocked_seconds for "mount"),
        and sets `source`."""
        st = _read_stats(self.mountpoint).get("stall", {})
        self.source = st.get("source", "fuse")
        if self.job == "mount" or self.source == "psi":
            return float(st["blocked_seconds"])
        if self.job in ("tree", "cgroup"):
            caller = st.get("caller")
            if caller is None:
                raise ProtocolError(f"aifs: the mount at {self.mountpoint} measures no stall per job "
                                    "(a daemon older than the stall per reader): use job='mount'")
            return float(caller["tree" if self.job == "tree" else "cgroup_totals"]["blocked_seconds"])
        for c in st.get("cgroups", ()):
            if c["cgroup"] == self.job:
                return float(c["blocked_seconds"])
        return 0.0  # no reader of that cgroup yet (or not among the 64 most blocked)

    def lap(self):
        """Returns the stall share since the last lap, in [0, 1], and starts a new lap."""
        blocked, t = self.blocked_seconds(), self._clock()
        wall = (t - self._t) * (1 if self.source == "psi" else self.readers)
        share = 0.0 if wall <= 0 else min(1.0, max(0.0, blocked - self._blocked) / wall)
        self._blocked, self._t = blocked, t
        return share


def stall(mountpoint, readers=1, job="tree"):
    """Returns a Stall for the aifs mount at `mountpoint` (its root); see Stall."""
    return Stall(mountpoint, readers, job=job)


def cgroup(pid="self"):
    """Returns the cgroup that aifs keys process `pid`'s reads by (Stall's job="cgroup"), from
    /proc/PID/cgroup: the v1 memory controller's path where that controller is on cgroup v1,
    else the cgroup v2 path; "" if there is neither. The daemon picks the same (fs/readers.go)."""
    v2 = ""
    with open(f"/proc/{pid}/cgroup", encoding="utf-8") as f:
        for line in f:
            parts = line.rstrip("\n").split(":", 2)
            if len(parts) != 3:
                continue
            if "memory" in parts[1].split(","):
                return parts[2]
            if parts[0] == "0" and parts[1] == "":
                v2 = parts[2]
    return v2


def __getattr__(name):
    if name in ("DistributedSampler", "PlanSampler"):
        from aifs import plan

        return getattr(plan, name)
    raise AttributeError(f"module 'aifs' has no attribute {name!r}")
