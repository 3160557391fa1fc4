"""Tests for aifs_plan against a fake mount: a temporary tree with an empty `.aifs/plan` file,
and `send_plan` replaced by a writer of that file (integration/torch_test.go sends plans to a
real mount by ioctl).

Run: /usr/bin/python3 -m unittest discover -s python -v
"""

import errno
import os
import tempfile
import unittest
import warnings
from unittest import mock

import torch
from torch.utils.data import (
    DataLoader,
    Dataset,
    DistributedSampler,
    RandomSampler,
    SequentialSampler,
    Subset,
)
from torchvision.datasets import ImageFolder

from aifs import plan as aifs_plan

CLASSES = ("n01", "n02", "n03")
IMAGES_PER_CLASS = 4


def make_tree(train_dir, extra_names=()):
    """Creates CLASSES x IMAGES_PER_CLASS small files, plus `extra_names` in the first class."""
    for cls in CLASSES:
        os.makedirs(os.path.join(train_dir, cls))
        names = [f"{cls}_{i}.JPEG" for i in range(IMAGES_PER_CLASS)]
        if cls == CLASSES[0]:
            names += extra_names
        for name in names:
            with open(os.path.join(train_dir, cls, name), "wb") as f:
                f.write(name.encode())


def make_mount(base, extra_names=()):
    """Creates `base/mnt` with a `.aifs/plan` file and a `train/` tree; returns (mount, train)."""
    mount = os.path.join(base, "mnt")
    os.makedirs(os.path.join(mount, ".aifs"))
    open(os.path.join(mount, ".aifs", "plan"), "wb").close()
    train = os.path.join(mount, "train")
    make_tree(train, extra_names)
    return mount, train


def image_folder(train):
    # loader=str: a sample is its own path, so the loader yields the paths it read.
    return ImageFolder(train, loader=str)


def read_plan(mount):
    with open(os.path.join(mount, ".aifs", "plan"), "rb") as f:
        return f.read()


def paths_plan(mount, paths):
    lines = [os.fsencode(os.path.relpath(p, mount)) + b"\n" for p in paths]
    return b"aifs-plan 1 paths\n" + b"".join(lines)


def loaded_paths(loader):
    """Iterates `loader` once and returns the sample paths in the order it yielded them."""
    paths = []
    for sample_paths, _ in loader:
        paths += [sample_paths] if isinstance(sample_paths, str) else sample_paths
    return paths


class Numbers(Dataset):
    """A dataset without `.samples` or `.root`."""

    def __len__(self):
        return 10

    def __getitem__(self, i):
        return i


def write_pieces(path, pieces):
    """Stands in for aifs_plan.send_plan on a fake mount: writes the plan into the file."""
    with open(path, "wb") as f:
        for piece in pieces:
            f.write(piece)


class PiecesTest(unittest.TestCase):
    def test_pieces_are_bounded_and_join_to_the_plan(self):
        lines = [b"%d\n" % i for i in range(20000)]
        pieces = list(aifs_plan._pieces(b"aifs-plan 1 indices\n", iter(lines)))
        self.assertGreater(len(pieces), 1)
        self.assertTrue(all(len(p) <= aifs_plan._PIECE_BYTES for p in pieces))
        self.assertEqual(b"".join(pieces), b"aifs-plan 1 indices\n" + b"".join(lines))

    def test_empty_plan_is_one_piece(self):
        self.assertEqual(list(aifs_plan._pieces(b"", iter(()))), [b""])

    def test_send_plan_to_a_plain_file_is_enotty(self):
        with tempfile.NamedTemporaryFile() as f:
            with self.assertRaises(OSError) as cm:
                aifs_plan.send_plan(f.name, [b"aifs-plan 1 indices\n"])
            self.assertEqual(cm.exception.errno, errno.ENOTTY)


class PlanSamplerTest(unittest.TestCase):
    def setUp(self):
        patcher = mock.patch.object(aifs_plan, "send_plan", write_pieces)
        patcher.start()
        self.addCleanup(patcher.stop)
        tmp = tempfile.TemporaryDirectory()
        self.addCleanup(tmp.cleanup)
        self.tmp = os.path.realpath(tmp.name)
        self.mount, self.train = make_mount(self.tmp)
        self.dataset = image_folder(self.train)
        self.all_paths = [path for path, _ in self.dataset.samples]

    def test_plan_loader_writes_each_epoch_order(self):
        for batch_size in (1, 4, None):
            for num_workers in (0, 2):
                with self.subTest(batch_size=batch_size, num_workers=num_workers):
                    loader = aifs_plan.plan(
                        DataLoader(
                            self.dataset,
                            shuffle=True,
                            batch_size=batch_size,
                            num_workers=num_workers,
                            generator=torch.Generator().manual_seed(batch_size or 0),
                        )
                    )
                    self.assertIs(aifs_plan.plan(loader), loader)
                    epochs = []
                    for _ in range(2):
                        epochs.append(loaded_paths(loader))
                        self.assertEqual(read_plan(self.mount), paths_plan(self.mount, epochs[-1]))
                    self.assertEqual(sorted(epochs[0]), sorted(self.all_paths))
                    self.assertNotEqual(epochs[0], epochs[1])

    def test_distributed_sampler_per_rank(self):
        for rank in (0, 1):
            with self.subTest(rank=rank):
                sampler = aifs_plan.PlanSampler(
                    DistributedSampler(self.dataset, num_replicas=2, rank=rank, seed=3),
                    self.dataset,
                )
                reference = DistributedSampler(self.dataset, num_replicas=2, rank=rank, seed=3)
                orders = []
                for epoch in (0, 1):
                    sampler.set_epoch(epoch)
                    reference.set_epoch(epoch)
                    orders.append(list(sampler))
                    self.assertEqual(orders[-1], list(reference))
                    self.assertEqual(len(sampler), len(orders[-1]))
                    expected = [self.all_paths[i] for i in orders[-1]]
                    self.assertEqual(read_plan(self.mount), paths_plan(self.mount, expected))
                self.assertNotEqual(orders[0], orders[1])

    def test_distributed_sampler_set_epoch_through_loader(self):
        distributed = DistributedSampler(self.dataset, num_replicas=2, rank=1, seed=5)
        loader = aifs_plan.plan(DataLoader(self.dataset, sampler=distributed, batch_size=2))
        reference = DistributedSampler(self.dataset, num_replicas=2, rank=1, seed=5)
        for epoch in (0, 1):
            loader.sampler.set_epoch(epoch)
            reference.set_epoch(epoch)
            expected = [self.all_paths[i] for i in reference]
            self.assertEqual(loaded_paths(loader), expected)
            self.assertEqual(read_plan(self.mount), paths_plan(self.mount, expected))

    def test_subset_resolves_to_underlying_samples(self):
        nested = Subset(Subset(self.dataset, [9, 5, 2, 7, 0]), [3, 1, 4])
        order = list(aifs_plan.PlanSampler(SequentialSampler(nested), nested))
        self.assertEqual(order, [0, 1, 2])
        expected = [self.all_paths[i] for i in (7, 5, 0)]
        self.assertEqual(read_plan(self.mount), paths_plan(self.mount, expected))

    def test_indices_mode_with_explicit_root(self):
        numbers = Numbers()
        sampler = RandomSampler(numbers, generator=torch.Generator().manual_seed(1))
        order = list(aifs_plan.PlanSampler(sampler, numbers, root=self.train))
        self.assertEqual(sorted(order), list(range(10)))
        expected = b"aifs-plan 1 indices\n" + b"".join(b"%d\n" % i for i in order)
        self.assertEqual(read_plan(self.mount), expected)

        subset = Subset(numbers, [8, 3, 6])
        list(aifs_plan.PlanSampler(SequentialSampler(subset), subset, root=self.mount))
        self.assertEqual(read_plan(self.mount), b"aifs-plan 1 indices\n8\n3\n6\n")

    def test_dataset_without_samples_or_root_writes_nothing(self):
        numbers = Numbers()
        order = list(aifs_plan.PlanSampler(SequentialSampler(numbers), numbers))
        self.assertEqual(order, list(range(10)))
        self.assertEqual(read_plan(self.mount), b"")

    def test_no_plan_file_is_pass_through(self):
        plain = os.path.join(self.tmp, "plain", "train")
        make_tree(plain)
        dataset = image_folder(plain)
        def shuffled_loader():
            generator = torch.Generator().manual_seed(2)
            return DataLoader(dataset, shuffle=True, batch_size=4, generator=generator)

        planned, unplanned = aifs_plan.plan(shuffled_loader()), shuffled_loader()
        for _ in range(2):
            self.assertEqual(loaded_paths(planned), loaded_paths(unplanned))
        self.assertFalse(os.path.exists(os.path.join(self.tmp, "plain", ".aifs")))
        self.assertEqual(read_plan(self.mount), b"")

    def test_search_stops_at_mount_point(self):
        # The plan file sits above `plain`, which pretends to be a mount point: not found there...
        os.makedirs(os.path.join(self.tmp, ".aifs"))
        open(os.path.join(self.tmp, ".aifs", "plan"), "wb").close()
        plain = os.path.join(self.tmp, "plain")
        make_tree(os.path.join(plain, "train"))
        dataset = image_folder(os.path.join(plain, "train"))
        with mock.patch("os.path.ismount", side_effect=lambda p: p == plain):
            list(aifs_plan.PlanSampler(SequentialSampler(dataset), dataset))
            self.assertEqual(read_plan(self.tmp), b"")
            # ... but the mount point itself is searched.
            os.makedirs(os.path.join(plain, ".aifs"))
            open(os.path.join(plain, ".aifs", "plan"), "wb").close()
            order = list(aifs_plan.PlanSampler(SequentialSampler(dataset), dataset))
        expected = [dataset.samples[i][0] for i in order]
        self.assertEqual(read_plan(plain), paths_plan(plain, expected))

    def test_symlinked_root_finds_mount(self):
        link = os.path.join(self.tmp, "link")
        os.symlink(self.train, link)
        dataset = image_folder(link)
        order = list(aifs_plan.PlanSampler(SequentialSampler(dataset), dataset))
        expected = [self.all_paths[i] for i in order]
        self.assertEqual(read_plan(self.mount), paths_plan(self.mount, expected))

    def test_write_failure_warns_once_and_yields_full_order(self):
        plan_path = os.path.join(self.mount, ".aifs", "plan")
        os.remove(plan_path)
        os.mkdir(plan_path)
        sampler = aifs_plan.PlanSampler(SequentialSampler(self.dataset), self.dataset)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            for _ in range(2):
                self.assertEqual(list(sampler), list(range(len(self.dataset))))
        self.assertEqual(len(caught), 1, [str(w.message) for w in caught])
        self.assertIn(plan_path, str(caught[0].message))

    def test_path_with_newline_is_skipped(self):
        mount, train = make_mount(os.path.join(self.tmp, "newline"), extra_names=("a\nb.JPEG",))
        dataset = image_folder(train)
        paths = loaded_paths(aifs_plan.plan(DataLoader(dataset, batch_size=4)))
        self.assertEqual(len(paths), len(CLASSES) * IMAGES_PER_CLASS + 1)
        self.assertIn(os.path.join(train, CLASSES[0], "a\nb.JPEG"), paths)
        self.assertEqual(read_plan(mount), paths_plan(mount, [p for p in paths if "\n" not in p]))


if __name__ == "__main__":
    unittest.main()


def deal(dataset, world, local, epoch=0, **kw):
    """Returns each rank's order for `epoch` from aifs_plan.DistributedSampler."""
    orders = []
    for rank in range(world):
        sampler = aifs_plan.DistributedSampler(dataset, num_replicas=world, rank=rank, local_world_size=local, **kw)
        sampler.set_epoch(epoch)
        orders.append(list(sampler))
        assert len(orders[-1]) == len(sampler)
    return orders


class Range(Dataset):
    def __init__(self, n):
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        return i


class DistributedSamplerTest(unittest.TestCase):
    """aifs_plan.DistributedSampler off a mount (ranges by sample index) and on a fake mount
    whose .aifs/locations puts the samples in another order."""

    def test_each_sample_once_per_epoch_node_ranges_stay(self):
        n, world, local = 96, 8, 2
        first = None
        for epoch in range(3):
            orders = deal(Range(n), world, local, epoch, seed=7)
            self.assertEqual(sorted(i for o in orders for i in o), list(range(n)))
            self.assertEqual({len(o) for o in orders}, {n // world})
            nodes = [sorted(orders[2 * k] + orders[2 * k + 1]) for k in range(world // local)]
            self.assertEqual(nodes, [list(range(24 * k, 24 * k + 24)) for k in range(4)])
            if first is None:
                first = orders
            else:
                self.assertNotEqual(orders, first)  # reshuffled within the node

    def test_padding_and_drop_last_keep_equal_counts(self):
        n, world = 101, 8
        orders = deal(Range(n), world, 2, seed=1)
        self.assertEqual({len(o) for o in orders}, {13})
        self.assertEqual(set(i for o in orders for i in o), set(range(n)))
        for k in range(4):  # padding repeats samples of the node's own range
            node = orders[2 * k] + orders[2 * k + 1]
            self.assertEqual(set(node), set(range(n * k // 4, n * (k + 1) // 4)))
        orders = deal(Range(n), world, 2, seed=1, drop_last=True)
        self.assertEqual({len(o) for o in orders}, {12})
        flat = [i for o in orders for i in o]
        self.assertEqual(len(flat), len(set(flat)))
        tiny = deal(Range(3), 8, 2)  # fewer samples than ranks: padded, never empty
        self.assertEqual({len(o) for o in tiny}, {1})

    def test_unshuffled_and_same_seed_agree_with_themselves(self):
        a = deal(Range(40), 4, 2, shuffle=False)
        self.assertEqual(a[0], list(range(0, 20, 2)))
        self.assertEqual(deal(Range(40), 4, 2, 3, seed=9), deal(Range(40), 4, 2, 3, seed=9))
        self.assertNotEqual(deal(Range(40), 4, 2, 3, seed=9), deal(Range(40), 4, 2, 3, seed=10))

    def test_rotate_every(self):
        n = 40
        for epoch, shift in ((0, 0), (1, 0), (2, 1), (3, 1), (4, 2)):
            orders = deal(Range(n), 4, 1, epoch, rotate_every=2)
            for rank in range(4):
                node = (rank + shift) % 4
                self.assertEqual(sorted(orders[rank]), list(range(10 * node, 10 * node + 10)), (epoch, rank))

    def test_local_world_size_from_environment(self):
        with mock.patch.dict(os.environ, {"LOCAL_WORLD_SIZE": "4"}):
            s = aifs_plan.DistributedSampler(Range(16), num_replicas=8, rank=5)
        self.assertEqual((s.local_world_size, s.node, s.local_rank), (4, 1, 1))
        with mock.patch.dict(os.environ, {"LOCAL_WORLD_SIZE": ""}):
            self.assertEqual(aifs_plan.DistributedSampler(Range(16), num_replicas=8, rank=5).local_world_size, 1)

    def test_local_world_size_from_host_names(self):
        import torch.distributed as dist

        def gather(hosts):
            def all_gather_object(out, _):
                out[:] = hosts
            return all_gather_object

        with mock.patch.dict(os.environ, {"LOCAL_WORLD_SIZE": ""}), \
                mock.patch.object(dist, "is_initialized", return_value=True):
            with mock.patch.object(dist, "all_gather_object", gather(["a", "a", "b", "b"])):
                self.assertEqual(aifs_plan._local_world_size(4, 2), 2)
            with mock.patch.object(dist, "all_gather_object", gather(["a", "b", "a", "b"])):
                with self.assertWarnsRegex(UserWarning, "not consecutive"):
                    self.assertEqual(aifs_plan._local_world_size(4, 2), 1)

    def test_refusals(self):
        with self.assertRaises(ValueError):
            aifs_plan.DistributedSampler(Range(8), num_replicas=4, rank=4)
        with self.assertRaises(ValueError):
            aifs_plan.DistributedSampler(Range(8), num_replicas=4, rank=0, local_world_size=3)
        with self.assertRaises(ValueError):
            aifs_plan.DistributedSampler(Range(8), num_replicas=4, rank=0, rotate_every=-1)
        with self.assertRaises(RuntimeError):  # torch.distributed is not initialised here
            aifs_plan.DistributedSampler(Range(8))

    def test_pack_order_from_locations(self):
        """On a (fake) mount, ranges follow the locations file: here the shards hold the samples
        in reverse order, so node 0 gets the last samples by index; plans name each rank's
        samples."""
        with tempfile.TemporaryDirectory() as base:
            mount, train = make_mount(os.path.realpath(base))
            dataset = image_folder(train)
            n = len(dataset)
            # Sample i gets inode i+2 (inode 1 is the root); its place puts it at n-1-i.
            records = [(0, 0, 0xFFFFFFFF, 0)] + [((n - 1 - i) % 4 * 100, 100, (n - 1 - i) // 4, 0) for i in range(n)]
            write_locations(os.path.join(mount, ".aifs", "locations"), records)
            index_of = {p: i for i, (p, _) in enumerate(dataset.samples)}
            with mock.patch.object(aifs_plan.aifs_direct, "inodes", lambda paths: [index_of[p] + 2 for p in paths]), \
                    mock.patch.object(aifs_plan, "send_plan", write_pieces):
                self.assertEqual(aifs_plan.extent_order(dataset), list(range(n - 1, -1, -1)))
                s = aifs_plan.DistributedSampler(dataset, num_replicas=2, rank=0, local_world_size=1)
                order = list(s)
                self.assertEqual(sorted(order), list(range(n // 2, n)))
                self.assertEqual(read_plan(mount), paths_plan(mount, [dataset.samples[i][0] for i in order]))
            # A locations file that is not one: a warning, and ranges by index.
            with open(os.path.join(mount, ".aifs", "locations"), "wb") as f:
                f.write(b"not a locations file" * 5)
            with self.assertWarnsRegex(UserWarning, "locations"):
                self.assertEqual(aifs_plan.extent_order(dataset), list(range(n)))

    def test_one_shuffled_node_reads_no_locations(self):
        """One node shuffling the whole set: the extent order would only change which
        permutation the seed picks, so no rank reads the locations file (a listing of every
        directory): the ranks still read each sample once an epoch, and send their plans."""
        with tempfile.TemporaryDirectory() as base:
            mount, train = make_mount(os.path.realpath(base))
            dataset = image_folder(train)
            n = len(dataset)

            def refuse(*_):
                raise AssertionError("sample_places called for one shuffled node")

            with mock.patch.object(aifs_plan, "sample_places", refuse), \
                    mock.patch.object(aifs_plan, "send_plan", write_pieces):
                orders = deal(dataset, 2, 2, epoch=1)
                self.assertEqual(sorted(orders[0] + orders[1]), list(range(n)))
                self.assertEqual(read_plan(mount), paths_plan(mount, [dataset.samples[i][0] for i in orders[1]]))
                with self.assertRaises(AssertionError):  # unshuffled, or several nodes: pack order
                    aifs_plan.DistributedSampler(dataset, num_replicas=2, rank=0, local_world_size=2, shuffle=False)

    def test_extent_order_sorts_by_shard_then_offset_stably(self):
        places = [(1, 0), (0, 5), (0, 5), (0, 1), (2, 1 << 45), (1, 0)]
        with mock.patch.object(aifs_plan, "sample_places", lambda *_: places):
            self.assertEqual(aifs_plan.extent_order(Range(len(places))), [3, 1, 2, 0, 5, 4])


class LineMakerTest(unittest.TestCase):
    def test_lines(self):
        with tempfile.TemporaryDirectory() as base:
            base = os.path.realpath(base)
            os.makedirs(os.path.join(base, "m", "train", "a"))
            os.symlink(os.path.join(base, "m", "train"), os.path.join(base, "link"))
            maker = aifs_plan._LineMaker(os.path.join(base, "link"), os.path.join(base, "m"))
            self.assertEqual(maker.line(os.path.join(base, "link", "a", "x.jpg")), b"train/a/x.jpg\n")
            self.assertEqual(maker.line(os.fsencode(os.path.join(base, "link", "a", "y.jpg"))), b"train/a/y.jpg\n")
            self.assertEqual(maker.line(os.path.join(base, "m", "train", "a", "z.jpg")), b"train/a/z.jpg\n")  # realpath
            self.assertEqual(maker.line(os.path.join(base, "elsewhere.jpg")), b"")  # outside the mount
            self.assertEqual(maker.line(os.path.join(base, "link", "a", "new\nline.jpg")), b"")
            self.assertEqual(aifs_plan._sample_lines([(os.path.join(base, "link", "a", "x.jpg"), 0)],
                                                     os.path.join(base, "link"), os.path.join(base, "m")),
                             [b"train/a/x.jpg\n"])


def write_locations(path, records):
    """Writes a locations file (format in fs/locations.go) of `records` (offset, size, shard,
    crc), one per inode from 1, with one shard and an empty source."""
    import struct

    head = struct.pack("<8sIIQQII24x", b"AIFSLOC\0", 1, 24, len(records), 64 + 24 * len(records), 1, 0x1234)
    body = b"".join(struct.pack("<QQII", *r) for r in records)
    tail = struct.pack("<QH", 1000, 5) + b"s.dat" + struct.pack("<H", 0)
    with open(path, "wb") as f:
        f.write(head + body + tail)
