"""aifs's Python side: plans for PyTorch samplers (aifs.plan), direct reads from the shards
(aifs.direct), and the protocol check between this package and a mount.

`aifs.DistributedSampler` and `aifs.PlanSampler` are aifs.plan's (they need torch, imported on
first use); aifs.direct needs only the standard library.
"""

import json
import os

__all__ = ["__version__", "PLAN_PROTOCOL", "ProtocolError", "check_protocol", "DistributedSampler", "PlanSampler"]

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
    from aifs import direct

    path = os.path.join(direct.control_root(mount_root), ".aifs", "stats")
    with open(path, "rb") as f:
        stats = json.load(f)
    theirs = stats.get("plan_protocol", 1)
    if theirs != PLAN_PROTOCOL:
        raise ProtocolError(
            f"aifs: the mount at {mount_root} speaks plan protocol {theirs} (daemon "
            f"{stats.get('version', 'before 0.1.0')}), this Python package {PLAN_PROTOCOL} "
            f"(aifs {__version__}): install the package from the same release as the daemon "
            "(pip install --no-build-isolation ./python)")


def __getattr__(name):
    if name in ("DistributedSampler", "PlanSampler"):
        from aifs import plan

        return getattr(plan, name)
    raise AttributeError(f"module 'aifs' has no attribute {name!r}")
