"""Plan hints for aifs: tell the mount which samples an epoch will read, in order.

Usage, the one-line change to an existing training script:

    loader = aifs_plan.plan(DataLoader(ImageFolder("/mnt/aifs/train"), shuffle=True, num_workers=8))

Before each epoch's order is yielded, the sampler writes it into the mount's hidden control file,
and the aifs daemon prefetches in that order. The plan is only a hint: off an aifs mount (on ext4,
say) nothing is written and the loader behaves exactly as before, and a failed write warns once and
never stops training.

Protocol (version 1):

- The control file is `<mount root>/.aifs/plan`. `.aifs` is never listed, but it can be looked up.
  The mount root is found by walking up from the dataset's root directory (symlinks resolved) to
  the first directory that contains `.aifs/plan`, stopping after `/` or a mount point.
- The mount is read-only in the kernel (nothing can write to it, root included), so the plan is
  not written but sent by ioctl: each epoch the file is opened read-only and the plan is sent in
  pieces of up to 16,368 bytes, one `ioctl(fd, PLAN_IOCTL, arg)` each, where `arg` is
  `struct { uint32 len; uint32 flags; uint8 data[16368]; }` (little-endian; `flags` 1 marks the
  first piece, which replaces the previous plan of the sending thread). `fs/plan.go` in aifs
  has the other end.
- The content is a header line and one entry per line, every line ending in `\\n`:
  - `aifs-plan 1 paths\\n`, then the paths of the samples relative to the mount root, as raw bytes
    (`os.fsencode`), in the order they will be read. Used for datasets with `.samples`
    (torchvision DatasetFolder and ImageFolder). A path containing `\\n`, or outside the mount, is
    left out.
  - `aifs-plan 1 indices\\n`, then decimal indices: index i is the i-th regular file of the whole
    mounted tree in pack order (sorted byte order of paths, each directory's files before its
    subdirectories). Used only when the caller names `root=` for a dataset without `.samples`.
- `torch.utils.data.Subset` is resolved through `.indices` to the dataset it wraps. Any other
  dataset without `.samples` (ConcatDataset, an IterableDataset, ...) gets no plan unless `root=`
  is given.
"""

import fcntl
import os
import struct
import warnings

from torch.utils.data import IterableDataset, Sampler, Subset

# One ioctl carries up to _PIECE_BYTES of plan after an 8-byte header (len, flags).
_PIECE_BYTES = 16368
_PLAN_START = 1
# _IOW(0xA1, 1, 8 + _PIECE_BYTES) in Linux's generic ioctl encoding (x86-64, arm64).
PLAN_IOCTL = (1 << 30) | ((8 + _PIECE_BYTES) << 16) | (0xA1 << 8) | 1

_PATHS_HEADER = b"aifs-plan 1 paths\n"
_INDICES_HEADER = b"aifs-plan 1 indices\n"


class PlanSampler(Sampler):
    """Wraps a sampler and writes each epoch's order to the aifs plan file before yielding it.

    `sampler` is any Sampler (RandomSampler, SequentialSampler, DistributedSampler, ...) over
    `dataset`. `root` is where the search for the mount root starts; it defaults to
    `dataset.root` (after resolving Subsets), and naming it turns on indices mode for a dataset
    without `.samples`. The mount root is looked up once, here.

    Iterating materialises the wrapped sampler's order for the epoch (`list(sampler)`), writes
    the plan, and returns an iterator over that order. Without a plan file the wrapped sampler is
    iterated directly and nothing is materialised or written. OSError from writing is reported
    once per PlanSampler with `warnings.warn`; the order is yielded in full regardless.

    Not safe for concurrent iteration from several threads (nor is the sampler it wraps).
    """

    def __init__(self, sampler, dataset, root=None):
        self.sampler = sampler
        self._samples = None  # paths mode: the base dataset's .samples; None: indices mode
        self._sample_lines = None  # paths mode: one plan line per sample, built on first use
        self._root = None  # where the search for the mount root started
        self._mount_root = None  # None: no plan file, pass-through
        self._warned = False

        base, self._index_map = _resolve_subsets(dataset)
        if isinstance(base, IterableDataset):
            return
        if hasattr(base, "samples"):
            self._samples = base.samples
            if root is None:
                root = getattr(base, "root", None)
        if isinstance(root, (str, bytes, os.PathLike)):
            self._root = os.fsdecode(root)
            self._mount_root = _find_mount_root(self._root)

    def __iter__(self):
        if self._mount_root is None:
            return iter(self.sampler)
        order = list(self.sampler)
        self._write_plan(order)
        return iter(order)

    def __len__(self):
        return len(self.sampler)

    def set_epoch(self, epoch):
        """Calls the wrapped sampler's set_epoch (DistributedSampler); a no-op if it has none."""
        set_epoch = getattr(self.sampler, "set_epoch", None)
        if set_epoch is not None:
            set_epoch(epoch)

    def _write_plan(self, order):
        indices = order if self._index_map is None else (self._index_map[i] for i in order)
        if self._samples is None:
            header, lines = _INDICES_HEADER, (b"%d\n" % int(i) for i in indices)
        else:
            if self._sample_lines is None:
                self._sample_lines = _sample_lines(self._samples, self._root, self._mount_root)
            header, lines = _PATHS_HEADER, map(self._sample_lines.__getitem__, indices)
        path = os.path.join(self._mount_root, ".aifs", "plan")
        try:
            send_plan(path, _pieces(header, lines))
        except OSError as e:
            if not self._warned:
                self._warned = True
                warnings.warn(f"aifs_plan: cannot send plan to {path}: {e}", stacklevel=3)


def _pieces(header, lines):
    """Yields `header` and `lines` joined and cut into pieces of at most _PIECE_BYTES (at least
    one piece, possibly empty)."""
    buf = bytearray(header)
    for line in lines:
        buf += line
        while len(buf) >= _PIECE_BYTES:
            yield bytes(buf[:_PIECE_BYTES])
            del buf[:_PIECE_BYTES]
    yield bytes(buf)


def send_plan(path, pieces):
    """Sends `pieces` (bytes of at most 16,368 each, in order) as one plan to the aifs plan file
    at `path`, one ioctl a piece. Raises OSError: ENOTTY when `path` is not an aifs plan file,
    EINVAL when the mount refuses the plan's content, EPERM when it takes no plans."""
    fd = os.open(path, os.O_RDONLY)
    try:
        flags = _PLAN_START
        for piece in pieces:
            # A mutable buffer is passed to the kernel as is (an immutable one only up to 1 KiB).
            arg = bytearray(struct.pack("<II", len(piece), flags) + piece)
            arg.extend(bytes(8 + _PIECE_BYTES - len(arg)))
            fcntl.ioctl(fd, PLAN_IOCTL, arg, True)
            flags = 0
    finally:
        os.close(fd)


def plan(loader):
    """Wraps `loader`'s sampler in a PlanSampler, in place, and returns the same loader.

    With a batch sampler (any batch_size but None) the BatchSampler's `.sampler` is replaced, so
    `loader.sampler` remains the original sampler, and `loader.sampler.set_epoch(e)` still works.
    With batch_size=None `loader.sampler` itself becomes the PlanSampler (DataLoader refuses to
    set it after construction; this sets it anyway). Call it before the first iteration: an
    iterator of persistent workers made earlier keeps its sampler. A loader already planned is
    returned unchanged; a batch sampler without a `.sampler` attribute cannot be hooked, which
    warns and leaves the loader unchanged.
    """
    batch_sampler = loader.batch_sampler
    if batch_sampler is None:
        if not isinstance(loader.sampler, PlanSampler):
            object.__setattr__(loader, "sampler", PlanSampler(loader.sampler, loader.dataset))
    elif not hasattr(batch_sampler, "sampler"):
        warnings.warn(
            f"aifs_plan: {type(batch_sampler).__name__} has no .sampler; no plan is written",
            stacklevel=2,
        )
    elif not isinstance(batch_sampler.sampler, PlanSampler):
        batch_sampler.sampler = PlanSampler(batch_sampler.sampler, loader.dataset)
    return loader


def _resolve_subsets(dataset):
    """Returns the dataset under any nesting of Subsets, and the list that maps an index of
    `dataset` to an index of it (None when `dataset` is not a Subset)."""
    index_map = None
    while isinstance(dataset, Subset):
        indices = [int(i) for i in dataset.indices]
        index_map = indices if index_map is None else [indices[i] for i in index_map]
        dataset = dataset.dataset
    return dataset, index_map


def _find_mount_root(start):
    """Returns the first of `start` (symlinks resolved) and its ancestors that contains
    `.aifs/plan`, looking no higher than the mount point `start` is on; None if there is none."""
    directory = os.path.realpath(start)
    while True:
        if os.path.exists(os.path.join(directory, ".aifs", "plan")):
            return directory
        parent = os.path.dirname(directory)
        if parent == directory or os.path.ismount(directory):
            return None
        directory = parent


def _sample_lines(samples, search_root, mount_root):
    """Returns, for each of `samples` (pairs whose first item is a file path), its plan line: the
    path relative to `mount_root`, fsencoded, with `\\n` appended; or b"" for a path that cannot be
    written (it contains a newline, or lies outside the mount).

    Paths under `search_root` as spelled (how DatasetFolder builds them) are rebased by string
    operations; any other path is resolved with realpath.
    """
    root_prefix = os.path.join(search_root, "")
    mount_relative_root = os.path.relpath(os.path.realpath(search_root), mount_root)
    rebased_prefix = "" if mount_relative_root == "." else os.path.join(mount_relative_root, "")
    parent_prefix = os.path.join(os.pardir, "")
    lines = []
    for sample in samples:
        path = os.fsdecode(sample[0])
        if path.startswith(root_prefix):
            relative = rebased_prefix + path[len(root_prefix) :]
        else:
            relative = os.path.relpath(os.path.realpath(path), mount_root)
        outside = relative == os.pardir or relative.startswith(parent_prefix)
        lines.append(b"" if outside or "\n" in relative else os.fsencode(relative) + b"\n")
    return lines
