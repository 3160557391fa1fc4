"""Tests for aifs.plan.ResumableSampler: exactly once per epoch across stops and resumes, the same
global order for any world size, and the plan sent from the resumed position."""

import os
import tempfile
import unittest
from unittest import mock

from torch.utils.data import DataLoader

from aifs import plan as aifs_plan


def run_ranks(n, world, seed, epoch, state=None, steps=None, batch=1):
    """Iterates `world` ranks in lockstep for `steps` rounds (None: to the end); returns the
    indices read and the state after (of rank 0)."""
    samplers = [aifs_plan.ResumableSampler(range(n), world, r, seed=seed) for r in range(world)]
    its = []
    for s in samplers:
        s.set_epoch(epoch)
        if state is not None:
            s.load_state_dict(state)
        its.append(iter(s))
    read = []
    rounds = 0
    while steps is None or rounds < steps * batch:
        got = [next(it, None) for it in its]
        if all(g is None for g in got):
            break
        read += [g for g in got if g is not None]
        rounds += 1
    return read, samplers[0].state_dict()


class ResumeTest(unittest.TestCase):
    def test_exactly_once_across_resume(self):
        n = 97
        for world in (1, 2, 3):
            for stop in (0, 1, 5, 16, 31):
                read, state = run_ranks(n, world, seed=7, epoch=3, steps=stop)
                self.assertEqual(state, {"epoch": 3, "seed": 7, "position": stop * world})
                rest, _ = run_ranks(n, world, seed=7, epoch=3, state=state)
                every = read + rest
                # each sample at least once; repeats only as the padding of the last round
                self.assertEqual(set(every), set(range(n)), (world, stop))
                self.assertEqual(len(every) - n, -(-n // world) * world - n, (world, stop))

    def test_resume_continues_the_same_order(self):
        full, _ = run_ranks(100, 2, seed=1, epoch=0)
        head, state = run_ranks(100, 2, seed=1, epoch=0, steps=20)
        rest, _ = run_ranks(100, 2, seed=1, epoch=0, state=state)
        self.assertEqual(head + rest, full)

    def test_world_size_2_to_4(self):
        """Stopped with 2 ranks, resumed with 4: every sample of the epoch exactly once, and the
        global order is the same for both world sizes."""
        n = 100
        self.assertEqual(aifs_plan.ResumableSampler(range(n), 2, 0, seed=5).global_order(2),
                         aifs_plan.ResumableSampler(range(n), 4, 3, seed=5).global_order(2))
        head, state = run_ranks(n, 2, seed=5, epoch=2, steps=10)
        rest, _ = run_ranks(n, 4, seed=5, epoch=2, state=state)
        self.assertEqual(sorted(head + rest), list(range(n)))
        full, _ = run_ranks(n, 1, seed=5, epoch=2)
        self.assertEqual(sorted(head), sorted(full[:20]))  # 2 ranks read the first 20 of the global order

    def test_world_size_change_at_odd_position(self):
        """Resumed at a position the new world size does not divide, and stopped again: still
        every sample exactly once (up to the last round's padding)."""
        n = 60
        a, state = run_ranks(n, 2, seed=9, epoch=0, steps=7)  # position 14
        b, state = run_ranks(n, 4, seed=9, epoch=0, state=state, steps=3)  # 14 + 12
        self.assertEqual(state["position"], 26)
        c, _ = run_ranks(n, 3, seed=9, epoch=0, state=state)
        self.assertEqual(sorted(a + b), sorted(set(a + b)))
        self.assertEqual(set(a + b + c), set(range(n)))
        self.assertEqual(len(a + b + c), n + 2)  # 34 left for 3 ranks: the last round pads 2

    def test_orders_differ_by_epoch_and_seed(self):
        a = aifs_plan.ResumableSampler(range(50), seed=0)
        self.assertNotEqual(a.global_order(0), a.global_order(1))
        self.assertNotEqual(a.global_order(0), aifs_plan.ResumableSampler(range(50), seed=1).global_order(0))

    def test_bad_state(self):
        s = aifs_plan.ResumableSampler(range(10), seed=0)
        with self.assertRaises(ValueError):
            s.load_state_dict({"epoch": 0, "seed": 1, "position": 0})
        with self.assertRaises(ValueError):
            s.load_state_dict({"epoch": 0, "seed": 0, "position": 11})

    def test_dataloader_and_plan_from_resumed_position(self):
        """Through a DataLoader with workers, the resumed epoch's plan starts at the resumed sample."""
        with tempfile.TemporaryDirectory() as mnt:
            os.mkdir(os.path.join(mnt, ".aifs"))
            open(os.path.join(mnt, ".aifs", "plan"), "w").close()
            sent = []

            def record(path, pieces):
                sent.append(b"".join(pieces))

            with mock.patch.object(aifs_plan, "send_plan", record):
                data = list(range(40))
                s = aifs_plan.ResumableSampler(data, seed=3, root=mnt)
                s.load_state_dict({"epoch": 1, "seed": 3, "position": 12})
                got = [int(i) for b in DataLoader(data, sampler=s, batch_size=4, num_workers=2) for i in b]
            order = s.global_order(1)
            self.assertEqual(got, order[12:])
            self.assertEqual(sent, [b"aifs-plan 1 indices\n" + b"".join(b"%d\n" % i for i in order[12:])])
            self.assertEqual(s.state_dict()["position"], 40)

    def test_iterable_dataset_warns(self):
        from torch.utils.data import IterableDataset

        class Stream(IterableDataset):
            def __iter__(self):
                return iter(())

        with self.assertWarnsRegex(UserWarning, "send_paths"):
            aifs_plan._PlanWriter(Stream())

    def test_send_paths(self):
        with tempfile.TemporaryDirectory() as mnt:
            os.makedirs(os.path.join(mnt, ".aifs"))
            os.makedirs(os.path.join(mnt, "shards"))
            open(os.path.join(mnt, ".aifs", "plan"), "w").close()
            sent = []
            with mock.patch.object(aifs_plan, "send_plan", lambda path, pieces: sent.append(b"".join(pieces))):
                root = aifs_plan.send_paths([os.path.join(mnt, "shards", "b.tar"), os.path.join(mnt, "shards", "a.tar")])
            self.assertEqual(root, os.path.realpath(mnt))
            self.assertEqual(sent, [b"aifs-plan 1 paths\nshards/b.tar\nshards/a.tar\n"])
            self.assertIsNone(aifs_plan.send_paths(["/proc/self/status"]))


if __name__ == "__main__":
    unittest.main()
