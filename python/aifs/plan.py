"""Plan hints for aifs: tell the mount which samples an epoch will read, in order.

Usage, the one-line change to an existing training script:

    loader = aifs_plan.plan(DataLoader(ImageFolder("/mnt/aifs/train"), shuffle=True, num_workers=8))

Before each epoch's order is yielded, the sampler writes it into the mount's hidden control file,
and the aifs daemon prefetches in that order. The plan is only a hint: off an aifs mount (on ext4,
say) nothing is written and the loader behaves exactly as before, and a failed write warns once and
never stops training.

Protocol (version 1), specified in aifs's docs/plan.md (python/test_plan_spec.py checks the
constants below against it):

- The control file is `<mount root>/.aifs/plan`. `.aifs` is never listed, but it can be looked up.
  On the kernel data plane (`aifs mount -o data=kernel`) the tree has no `.aifs`: the control
  directory is `_KERNEL_CONTROL_ROOT/MAJOR:MINOR/.aifs`, by the mount root's device number
  (aifs_direct.control_root).
  The mount root is found by walking up from the dataset's root directory (symlinks resolved) to
  the first directory that contains `.aifs/plan`, stopping after `/` or a mount point.
- The mount is read-only in the kernel, so the plan is not written but sent by ioctl: each epoch
  the file is opened read-only and the plan is sent in pieces of up to _PIECE_BYTES, one
  `ioctl(fd, PLAN_IOCTL, arg)` each (`flags` _PLAN_START marks the first piece, which replaces
  the previous plan of the sending thread).
- The content is a header line and one entry per line:
  - `aifs-plan 1 paths`, then the paths of the samples relative to the mount root, as raw bytes
    (`os.fsencode`). Used for datasets with `.samples` (torchvision DatasetFolder and
    ImageFolder). A path containing `\\n`, or outside the mount, is left out.
  - `aifs-plan 1 indices`, then decimal indices in pack order. Used only when the caller names
    `root=` for a dataset without `.samples`.
- `torch.utils.data.Subset` is resolved through `.indices` to the dataset it wraps. Any other
  dataset without `.samples` (ConcatDataset, an IterableDataset, ...) gets no plan unless `root=`
  is given.

Many nodes: `aifs_plan.DistributedSampler(dataset, ...)` replaces torch's DistributedSampler (same
arguments) and keeps each node on its own contiguous range of the shards, writing plans as
PlanSampler does; docs/multinode.md.
"""

import fcntl
import os
import socket
import struct
import warnings

import torch
from torch.utils.data import IterableDataset, Sampler, Subset

import aifs
from aifs import direct as aifs_direct

# One ioctl carries up to _PIECE_BYTES of plan after an 8-byte header (len, flags).
_PIECE_BYTES = 16368
_PLAN_START = 1
# _IOW(0xA1, 1, 8 + _PIECE_BYTES) in Linux's generic ioctl encoding (x86-64, arm64).
PLAN_IOCTL = (1 << 30) | ((8 + _PIECE_BYTES) << 16) | (0xA1 << 8) | 1

_PATHS_HEADER = b"aifs-plan 1 paths\n"
_INDICES_HEADER = b"aifs-plan 1 indices\n"
# The plan file, relative to the mount root.
_PLAN_PATH = (".aifs", "plan")
# Where the kernel data plane's control mounts are (aifs_direct.control_root).
_KERNEL_CONTROL_ROOT = "/run/aifs"


class _PlanWriter:
    """Writes orders of a dataset's samples as plans to the aifs mount the dataset lies on.

    `root` is where the search for the mount root starts; it defaults to `dataset.root` (after
    resolving Subsets), and naming it turns on indices mode for a dataset without `.samples`.
    The mount root is looked up once, here; `mount_root` is None off an aifs mount, and then
    `write` does nothing. OSError from writing is reported once per writer with
    `warnings.warn`.
    """

    def __init__(self, dataset, root=None):
        self.samples = None  # paths mode: the base dataset's .samples; None: indices mode
        self.root = None  # where the search for the mount root started
        self.mount_root = None  # None: no plan file
        self._lines = None  # paths mode: makes the plan line of a sample (_LineMaker), made on first use
        self._warned = False

        base, self.index_map = _resolve_subsets(dataset)
        if isinstance(base, IterableDataset):
            warnings.warn(f"aifs.plan: {type(base).__name__} is an IterableDataset, which has no order a "
                          "sampler can see: no plan is sent; send one yourself with "
                          "aifs.plan.send_paths(paths) each epoch", stacklevel=4)
            return
        if hasattr(base, "samples"):
            self.samples = base.samples
            if root is None:
                root = getattr(base, "root", None)
        if isinstance(root, (str, bytes, os.PathLike)):
            self.root = os.fsdecode(root)
            self.mount_root = _find_mount_root(self.root)
        if self.mount_root is not None:
            try:
                aifs.check_protocol(self.mount_root)  # ProtocolError: another version
            except OSError:
                pass  # no stats file to read (a fake mount): the plan's send says what fails

    def base_index(self, i):
        """Returns the index in the base dataset (under any Subsets) of the dataset's index i."""
        return int(i) if self.index_map is None else self.index_map[i]

    def write(self, order):
        """Sends `order` (indices of the dataset) as this thread's plan; a no-op off a mount."""
        if self.mount_root is None:
            return
        indices = map(self.base_index, order)
        if self.samples is None:
            header, lines = _INDICES_HEADER, (b"%d\n" % i for i in indices)
        else:
            if self._lines is None:
                self._lines = _LineMaker(self.root, self.mount_root)
            samples, line = self.samples, self._lines.line
            header, lines = _PATHS_HEADER, (line(samples[i][0]) for i in indices)
        path = os.path.join(aifs_direct.control_root(self.mount_root), *_PLAN_PATH)
        try:
            send_plan(path, _pieces(header, lines))
        except OSError as e:
            if not self._warned:
                self._warned = True
                warnings.warn(f"aifs_plan: cannot send plan to {path}: {e}", stacklevel=4)


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
        self._plan = _PlanWriter(dataset, root)

    def __iter__(self):
        if self._plan.mount_root is None:
            return iter(self.sampler)
        order = list(self.sampler)
        self._plan.write(order)
        return iter(order)

    def __len__(self):
        return len(self.sampler)

    def set_epoch(self, epoch):
        """Calls the wrapped sampler's set_epoch (DistributedSampler); a no-op if it has none."""
        set_epoch = getattr(self.sampler, "set_epoch", None)
        if set_epoch is not None:
            set_epoch(epoch)


class DistributedSampler(Sampler):
    """A drop-in for `torch.utils.data.DistributedSampler` that keeps each node on its own
    contiguous range of the shard set, so that a node's disk cache needs only its share of the
    dataset and no node fetches what another reads (docs/multinode.md).

    Same arguments and guarantees as torch's: `num_replicas` and `rank` (default: from
    torch.distributed), `shuffle`, `seed`, `drop_last`, `set_epoch`, every rank yields
    `len(self)` samples, and, without drop_last, every sample is yielded at least once an epoch
    across the ranks (exactly once when the dataset's length divides by the world size; the
    padding repeats samples of the same node). What differs is how samples are dealt out:

    - Ranks are grouped into nodes of `local_world_size` consecutive ranks (default: the
      LOCAL_WORLD_SIZE variable torchrun sets; else, with torch.distributed initialised, the
      ranks that share a host name, found by a collective call, so every rank must build the
      sampler; else 1). Rank r is local rank r % local_world_size of node r //
      local_world_size, as torchrun numbers them (a LOCAL_RANK that disagrees warns).
    - The samples, in extent order (their place in the shards, read once from the mount's
      `.aifs/locations`; off an aifs mount, or for a dataset without `.samples`, their index
      order), are cut into one contiguous range per node, of equal size (±1). A cut may fall
      inside a shard; it then costs one chunk (4 MiB) fetched by both nodes. With one node and
      `shuffle`, the range is the whole set in a fresh shuffle, whatever its order: the
      locations are not read, and the samples are taken in index order before the shuffle.
    - The ranges stay with their nodes from epoch to epoch while the world size is the same.
      With `rotate_every=K` (> 0), each node moves to the next node's range every K epochs:
      more mixing of the samples a rank sees, at the cost of fetching a new range (S3) every K
      epochs.
    - Each epoch, with `shuffle`, the node's range is shuffled (a permutation seeded by
      `seed + epoch`, the same on every rank of the node) and dealt to its ranks in turn; the
      node's ranks then read disjoint parts of the same range.
    - Each epoch's order is sent to the mount as a plan, as PlanSampler does (`root` as there).

    A batch mixes only samples of one node's range, in shuffled order; docs/multinode.md
    measures what that costs against a global shuffle.
    """

    def __init__(self, dataset, num_replicas=None, rank=None, shuffle=True, seed=0, drop_last=False,
                 *, local_world_size=None, rotate_every=0, root=None):
        if num_replicas is None or rank is None:
            import torch.distributed as dist

            if not dist.is_available() or not dist.is_initialized():
                raise RuntimeError("aifs_plan.DistributedSampler: give num_replicas and rank, or "
                                   "initialise torch.distributed first")
            num_replicas = dist.get_world_size() if num_replicas is None else num_replicas
            rank = dist.get_rank() if rank is None else rank
        if not 0 <= rank < num_replicas:
            raise ValueError(f"invalid rank {rank}: it must lie in [0, {num_replicas})")
        if local_world_size is None:
            local_world_size = _local_world_size(num_replicas, rank)
        if local_world_size < 1 or num_replicas % local_world_size:
            raise ValueError(f"local_world_size {local_world_size} does not divide the world size "
                             f"{num_replicas}")
        if rotate_every < 0:
            raise ValueError(f"rotate_every {rotate_every} must be >= 0")
        self.num_replicas, self.rank = num_replicas, rank
        self.shuffle, self.seed, self.drop_last, self.epoch = shuffle, seed, drop_last, 0
        self.local_world_size, self.rotate_every = local_world_size, rotate_every
        self.nodes = num_replicas // local_world_size
        self.node, self.local_rank = divmod(rank, local_world_size)
        env_local = os.environ.get("LOCAL_RANK")
        if env_local and int(env_local) != self.local_rank and local_world_size > 1:
            warnings.warn(f"aifs_plan.DistributedSampler: rank {rank} is local rank {self.local_rank} of node "
                          f"{self.node} here, but LOCAL_RANK is {env_local}: ranks are taken to be numbered "
                          "node by node, as torchrun numbers them", stacklevel=2)
        n = len(dataset)
        if drop_last and n % num_replicas:
            self.num_samples = n // num_replicas
        else:
            self.num_samples = -(-n // num_replicas)
        self.total_size = self.num_samples * num_replicas
        self._plan = _PlanWriter(dataset, root)
        # The extent order as one tensor, not a list of ints: the rank's DataLoader workers fork
        # from this process, and a list's 12,000 objects a rank cost 1-2 MiB in each process
        # (docs/bench/mlperf.md, "Findings").
        if self.nodes == 1 and shuffle:
            # One node reads the whole set in a fresh shuffle: the extent order would change
            # nothing but which permutation the seed picks, and reading it costs a listing of
            # every directory and the locations file in each rank.
            self._order = torch.arange(n, dtype=torch.int64)
        else:
            self._order = _extent_order_tensor(dataset, self._plan)
        self._bounds = [n * k // self.nodes for k in range(self.nodes + 1)]

    def node_range(self, epoch=None):
        """Returns the dataset indices of the range this rank's node reads in `epoch` (default:
        the current one), in extent order."""
        return self._node_range(epoch).tolist()

    def _node_range(self, epoch=None):
        epoch = self.epoch if epoch is None else epoch
        node = self.node
        if self.rotate_every:
            node = (node + epoch // self.rotate_every) % self.nodes
        return self._order[self._bounds[node] : self._bounds[node + 1]]

    def __iter__(self):
        items = self._node_range()
        if self.shuffle:
            g = torch.Generator()
            g.manual_seed(self.seed + self.epoch)
            items = items[torch.randperm(len(items), generator=g)]
        per_node = self.num_samples * self.local_world_size
        pad = per_node - len(items)
        if pad > 0:  # padding: repeat the node's own samples (any, if it has none), as torch does
            source = items if len(items) else self._order
            items = torch.cat([items, source.repeat(-(-pad // len(source)))[:pad]])
        order = items[self.local_rank : per_node : self.local_world_size].tolist()
        self._plan.write(order)
        return iter(order)

    def __len__(self):
        return self.num_samples

    def set_epoch(self, epoch):
        """Sets the epoch, which seeds the shuffle and (with rotate_every) picks the range."""
        self.epoch = epoch


def _local_world_size(world, rank):
    """Returns the ranks per node: LOCAL_WORLD_SIZE, else the ranks on this host (with
    torch.distributed initialised, if they are `world / nodes` consecutive ranks), else 1."""
    env = os.environ.get("LOCAL_WORLD_SIZE")
    if env:
        return int(env)
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        hosts = [None] * world
        dist.all_gather_object(hosts, socket.gethostname())
        same = [r for r in range(world) if hosts[r] == hosts[rank]]
        if same == list(range(same[0], same[0] + len(same))) and same[0] % len(same) == 0:
            return len(same)
        warnings.warn("aifs_plan.DistributedSampler: the ranks of a host are not consecutive; each "
                      "rank is taken for a node (set LOCAL_WORLD_SIZE)", stacklevel=3)
    return 1


def extent_order(dataset, plan=None):
    """Returns the indices of `dataset` sorted by where their samples lie in the shard set
    (shard, then offset); its index order where `sample_places` knows none."""
    return _extent_order_tensor(dataset, plan).tolist()


def _extent_order_tensor(dataset, plan=None):
    """extent_order as a tensor of int64. Ties keep index order (stable sorts, offset then
    shard)."""
    places = sample_places(dataset, plan)
    if places is None:
        return torch.arange(len(dataset), dtype=torch.int64)
    shard = torch.tensor([p[0] for p in places], dtype=torch.int64)
    offset = torch.tensor([p[1] for p in places], dtype=torch.int64)
    del places
    order = torch.sort(offset, stable=True).indices
    return order[torch.sort(shard[order], stable=True).indices]


def sample_places(dataset, plan=None):
    """Returns, for each index of `dataset`, (shard number, offset) of its sample in the shard
    set, read from the mount's `.aifs/locations`; None when the dataset is not on an aifs
    mount, has no `.samples`, or a sample is not found there (a failure to read the file
    warns)."""
    plan = _PlanWriter(dataset) if plan is None else plan
    if plan.mount_root is None or plan.samples is None:
        return None
    try:
        loc = aifs_direct.Locations(plan.mount_root)
        paths = [os.fsdecode(plan.samples[plan.base_index(i)][0]) for i in range(len(dataset))]
        places = [loc.place(ino) for ino in aifs_direct.inodes(aifs_direct.control_paths(paths, plan.mount_root))]
    except (OSError, ValueError) as e:
        warnings.warn(f"aifs_plan: cannot read the sample locations of {plan.mount_root}: {e}; "
                      "ranges follow the sample order", stacklevel=3)
        return None
    return None if None in places else places


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
    """Sends `pieces` (bytes of at most _PIECE_BYTES each, in order) as one plan to the aifs plan file
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


def send_paths(paths, mount_root=None):
    """Sends `paths` (files on one aifs mount, in the order they will be read) as this thread's
    plan: the way to plan for an IterableDataset (a WebDataset pipeline, say), whose order no
    sampler sees. `mount_root` defaults to the mount root above the first path. Returns the
    mount root the plan went to, or None when the paths lie on no aifs mount (nothing is sent).
    Raises aifs.ProtocolError for a mount of another plan protocol, OSError when sending fails.
    """
    paths = [os.fsdecode(p) for p in paths]
    if not paths:
        return None
    if mount_root is None:
        mount_root = _find_mount_root(os.path.dirname(paths[0]))
        if mount_root is None:
            return None
    mount_root = os.path.realpath(mount_root)
    try:
        aifs.check_protocol(mount_root)
    except OSError:
        pass
    lines = _sample_lines([(p,) for p in paths], mount_root, mount_root)
    path = os.path.join(aifs_direct.control_root(mount_root), *_PLAN_PATH)
    send_plan(path, _pieces(_PATHS_HEADER, iter(lines)))
    return mount_root


class ResumableSampler(Sampler):
    """A sampler whose order is one global permutation per epoch, dealt to the ranks in turn,
    that can stop mid-epoch and resume, sending the plan from where it resumes.

    Order: epoch e's global order is a permutation of the dataset's indices seeded by
    `seed + e` (`shuffle=False`: index order), the same whatever the world size or the number
    of workers. Rank r of `num_replicas` yields global positions start + r, start + r + W, ...
    (W = num_replicas), padded by wrapping to the front of the order so every rank yields the
    same count (as torch's DistributedSampler; `drop_last` drops the tail instead). DataLoader
    workers take the samples the sampler yields, so their number changes nothing.

    State (torchdata.stateful_dataloader's convention): `state_dict()` is {"epoch", "seed",
    "position"}: `position` is the global position reached, the resumed position plus the
    samples yielded by this rank times the world size (all ranks step together), at most the
    dataset's length. `load_state_dict(state)` makes the next
    iteration start there: a job that stopped after step k of epoch e (k * batch_size samples
    per rank) resumes with sample k of the same order and sends the plan of what remains. With
    plain DataLoader, whose prefetching runs the sampler ahead of the training step, compute
    the state from the step: `{"epoch": e, "seed": s, "position": k * batch_size * W}`.

    World size change: the global order and the position carry over, so a job resumed with 4
    ranks instead of 2 reads every remaining sample of the epoch exactly once; what changes is
    which rank reads which sample (and so which node's cache holds it), and, without
    drop_last, which samples pad the last round. Exactly once needs the stop at a step all
    ranks finished.
    """

    def __init__(self, dataset, num_replicas=1, rank=0, shuffle=True, seed=0, drop_last=False, *, root=None):
        if not 0 <= rank < num_replicas:
            raise ValueError(f"invalid rank {rank}: it must lie in [0, {num_replicas})")
        self.n, self.num_replicas, self.rank = len(dataset), num_replicas, rank
        self.shuffle, self.seed, self.drop_last = shuffle, seed, drop_last
        self.epoch, self._start, self._base, self._yielded = 0, 0, 0, 0
        self._plan = _PlanWriter(dataset, root)

    def global_order(self, epoch=None):
        """Returns epoch's (default: the current one) order of all indices, as every rank sees it."""
        epoch = self.epoch if epoch is None else epoch
        if not self.shuffle:
            return list(range(self.n))
        g = torch.Generator()
        g.manual_seed(self.seed + epoch)
        return torch.randperm(self.n, generator=g).tolist()

    def _rank_order(self):
        order, start, w = self.global_order(), self._start, self.num_replicas
        rest = self.n - start
        count = rest // w if self.drop_last else -(-rest // w)
        positions = [start + self.rank + i * w for i in range(count)]
        return [order[p % self.n] for p in positions] if self.n else []

    def __iter__(self):
        order = self._rank_order()
        self._base, self._yielded, self._start = self._start, 0, 0
        self._plan.write(order)
        return self._iterate(order)

    def _iterate(self, order):
        for i in order:
            self._yielded += 1
            yield i

    def __len__(self):
        rest = self.n - self._start
        return rest // self.num_replicas if self.drop_last else -(-rest // self.num_replicas)

    def set_epoch(self, epoch):
        """Sets the epoch, which seeds the shuffle; the next iteration starts at its beginning
        unless load_state_dict names a position."""
        self.epoch = epoch

    def state_dict(self):
        return {"epoch": self.epoch, "seed": self.seed, "position": min(self.n, self._base + self._yielded * self.num_replicas)}

    def load_state_dict(self, state):
        if state.get("seed", self.seed) != self.seed:
            raise ValueError(f"aifs.plan.ResumableSampler: state of seed {state['seed']}, sampler of seed {self.seed}")
        position = int(state["position"])
        if not 0 <= position <= self.n:
            raise ValueError(f"aifs.plan.ResumableSampler: position {position} outside [0, {self.n}]")
        self.epoch, self._start, self._base, self._yielded = int(state["epoch"]), position, position, 0


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
        if os.path.exists(os.path.join(aifs_direct.control_root(directory), *_PLAN_PATH)):
            return directory
        parent = os.path.dirname(directory)
        if parent == directory or os.path.ismount(directory):
            return None
        directory = parent


def _sample_lines(samples, search_root, mount_root):
    """Returns, for each of `samples` (pairs whose first item is a file path), its plan line
    (_LineMaker.line)."""
    maker = _LineMaker(search_root, mount_root)
    return [maker.line(sample[0]) for sample in samples]


class _LineMaker:
    """Makes the plan line of a sample's path: the path relative to `mount_root`, fsencoded,
    with `\\n` appended; or b"" for a path that cannot be written (it contains a newline, or lies
    outside the mount).

    Paths under `search_root` as spelled (how DatasetFolder builds them) are rebased by string
    operations; any other path is resolved with realpath. A sampler makes the lines of each
    epoch's order as it sends them, rather than keeping one per sample: building 12,000 of them
    at once left 4 MiB of freed memory in each rank (docs/bench/mlperf.md, "Findings").
    """

    def __init__(self, search_root, mount_root):
        self.mount_root = mount_root
        self.root_prefix = os.path.join(search_root, "")
        mount_relative_root = os.path.relpath(os.path.realpath(search_root), mount_root)
        self.rebased_prefix = "" if mount_relative_root == "." else os.path.join(mount_relative_root, "")
        self.parent_prefix = os.path.join(os.pardir, "")

    def line(self, path):
        """Returns the plan line of `path` (str or bytes)."""
        path = os.fsdecode(path)
        if path.startswith(self.root_prefix):
            relative = self.rebased_prefix + path[len(self.root_prefix) :]
        else:
            relative = os.path.relpath(os.path.realpath(path), self.mount_root)
        outside = relative == os.pardir or relative.startswith(self.parent_prefix)
        return b"" if outside or "\n" in relative else os.fsencode(relative) + b"\n"
