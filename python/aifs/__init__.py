"""aifs's Python side: plans for PyTorch samplers (aifs.plan), direct reads from the shards
(aifs.direct), and the protocol check between this package and a mount.

`aifs.DistributedSampler` and `aifs.PlanSampler` are aifs.plan's (they need torch, imported on
first use); aifs.direct needs only the standard library.
"""

import json
import os

__all__ = ["__version__", "PLAN_PROTOCOL", "ProtocolError", "check_protocol", "stall", "Stall", "DistributedSampler",
           "PlanSampler"]

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
    was made) that they spent blocked in aifs: the growth of the stats file's
    stall.blocked_seconds (time in LOOKUP, GETATTR, OPEN and READ, summed over requests),
    divided by the wall time times `readers` (the processes reading: a DataLoader's
    num_workers, or 1 without workers). The mount's figure counts every reader of the mount,
    not only this job's; on the kernel data plane it stays near 0 (docs/plan.md, "Data stall").

        s = aifs.stall("/mnt/aifs", readers=8)
        for epoch in range(epochs):
            train_one_epoch()
            print(f"data stall {s.lap():.1%}")
    """

    def __init__(self, mountpoint, readers=1, *, clock=None):
        import time

        if readers < 1:
            raise ValueError(f"aifs.stall: readers {readers} must be >= 1")
        self.mountpoint, self.readers = mountpoint, readers
        self._clock = clock or time.monotonic
        self._blocked, self._t = self.blocked_seconds(), self._clock()

    def blocked_seconds(self):
        """Returns the mount's stall.blocked_seconds now."""
        return float(_read_stats(self.mountpoint)["stall"]["blocked_seconds"])

    def lap(self):
        """Returns the stall share since the last lap, in [0, 1], and starts a new lap."""
        blocked, t = self.blocked_seconds(), self._clock()
        wall = (t - self._t) * self.readers
        share = 0.0 if wall <= 0 else min(1.0, (blocked - self._blocked) / wall)
        self._blocked, self._t = blocked, t
        return share


def stall(mountpoint, readers=1):
    """Returns a Stall for the aifs mount at `mountpoint` (its root); see Stall."""
    return Stall(mountpoint, readers)


def __getattr__(name):
    if name in ("DistributedSampler", "PlanSampler"):
        from aifs import plan

        return getattr(plan, name)
    raise AttributeError(f"module 'aifs' has no attribute {name!r}")
