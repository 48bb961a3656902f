"""An actor computes each distinct task of a round once and charges every worker its own.

The stopwatch here reads 1 s for every timed segment (a weight load, a task, an
encoding), so what each logical worker is charged can be counted exactly: it must not
depend on which other workers share its actor (the virtual clock's packing
independence) and it must not fall on whichever worker computed a shared task first.
"""

import numpy as np
import torch
from torch import nn

from gclab.coding.contract import Part, Task
from gclab.ml.batches import BatchPlan, Normalizer
from gclab.ml.gradients import BatchMaker, FlatModel, loss_and_gradient
from gclab.ml.models import SmallCNN
from gclab.runtime.tasks import RoundTasks
from gclab.runtime.worker import HostReport

K, PER_SHARD = 6, 3


class OneSecond:
    """A stopwatch that reads one second for every segment it times."""

    def start(self) -> None:
        pass

    def host_part(self) -> None:
        pass

    def stop(self) -> float:
        return 1.0


def batches() -> BatchMaker:
    g = torch.Generator().manual_seed(0)
    shards = {
        j: (torch.randint(0, 256, (8, 3, 32, 32), generator=g, dtype=torch.uint8),
            torch.randint(0, 10, (8,), generator=g))
        for j in range(K)
    }  # fmt: skip
    normalizer = Normalizer(torch.full((3,), 0.5), torch.full((3,), 0.25))
    return BatchMaker(shards, BatchPlan((8,) * K, PER_SHARD, seed=0), normalizer, False)


def round_tasks(model: nn.Module, plans: dict, num_jobs: int = 5) -> RoundTasks:
    """``plans``'s workers in one actor; jobs 0..4 on weights of their own, model t mod 2."""
    flat = FlatModel(model)
    size = flat.num_params + flat.num_buffers
    weights = {t: np.full(2 * size, 0.01 * (t + 1), dtype=np.float32) for t in range(5)}
    parts = tuple(Part(j) for j in range(K))
    return RoundTasks(flat, batches(), parts, OneSecond(), weights, plans, 2, num_jobs, False)


def cnn() -> nn.Module:
    torch.manual_seed(0)
    return SmallCNN(width=2)


# worker 2 redoes job 1's part 0 between two tasks of job 3 (an SR-SGC-like repeat)
PLANS = {
    0: (Task(3, 0), Task(3, 1)),
    1: (Task(3, 1), Task(3, 2)),
    2: (Task(3, 2), Task(1, 0), Task(3, 3)),
    3: (Task(3, 3), Task(7, 4)),  # job 7 >= num_jobs: a drain task, zeros
}


def test_shared_tasks_are_computed_once_and_every_worker_pays_for_its_own() -> None:
    packed = round_tasks(cnn(), PLANS)
    charged = {w: packed.take(w, tasks) for w, tasks in PLANS.items()}
    assert packed.shared and packed.computed == 5  # (3,0) (3,1) (3,2) (1,0) (3,3)
    # each worker pays a load at every change of job and one second per real task,
    # exactly what it pays alone in an actor of its own
    assert {w: c.seconds for w, c in charged.items()} == {0: 3, 1: 3, 2: 6, 3: 2}
    for w, tasks in PLANS.items():
        alone = round_tasks(cnn(), {w: tasks})
        assert alone.take(w, tasks).seconds == charged[w].seconds
    assert charged[2].model == 1 and charged[3].model == 1  # job 3 trains model 3 mod 2
    assert not charged[3].partials[Task(7, 4)].any()
    # one computation serves both workers, with the gradient computing it alone gives
    assert charged[0].partials[Task(3, 1)] is charged[1].partials[Task(3, 1)]
    alone = round_tasks(cnn(), {1: PLANS[1]}).take(1, PLANS[1])
    assert np.array_equal(alone.partials[Task(3, 1)], charged[0].partials[Task(3, 1)])
    assert charged[0].samples == 2 * PER_SHARD


def test_a_gradient_is_dropped_once_the_last_worker_that_plans_it_is_done() -> None:
    tasks = round_tasks(cnn(), PLANS)
    for w in (0, 1):
        tasks.take(w, PLANS[w])
        tasks.release(w, PLANS[w])
    assert set(tasks.done) == {(None, Task(3, 2))}  # worker 2 still needs it
    for w in (2, 3):
        tasks.take(w, PLANS[w])
        tasks.release(w, PLANS[w])
    assert not tasks.done


def test_with_batch_norm_every_worker_computes_its_own_tasks_from_the_broadcast() -> None:
    """Running statistics follow a worker's own sequence of tasks: nothing is shared."""
    torch.manual_seed(0)
    model = nn.Sequential(
        nn.Conv2d(3, 2, 3), nn.BatchNorm2d(2), nn.Flatten(), nn.Linear(2 * 30 * 30, 10)
    )
    tasks = round_tasks(model, PLANS)
    seconds = [tasks.take(w, PLANS[w]).seconds for w in PLANS]
    assert not tasks.shared
    assert tasks.computed == 8 and tasks.loads == 6  # every real task; a load per job change
    assert seconds == [3, 3, 6, 2]
    # worker 1's task (3, 1) was computed again, from the broadcast state, as worker 0's
    flat = FlatModel(model)
    flat.load_state_vector(tasks.weights[3].reshape(2, -1)[1])
    x, y = tasks.batches(3, Part(1))
    _, want = loss_and_gradient(flat, x, y)
    assert tasks.done[1, Task(3, 1)].gradient.tolist() == want.tolist()


def test_a_host_report_flags_non_finite_rows_and_gives_each_worker_a_view_of_its_row() -> None:
    packets = np.ones((3, 4), dtype=np.float32)
    packets[1, 2] = np.inf
    report = HostReport(
        5, [4, 5, 6], packets, np.array([0.1, 0.2, 0.3]), np.ones(3), np.full(3, 2),
        np.zeros((3, 0), dtype=np.float32), np.array([0, -1, 1]), {"computing": 1.0},
    )  # fmt: skip
    assert report.finite().tolist() == [True, False, True]
    reports = report.reports()
    assert list(reports) == [4, 5, 6]
    assert np.shares_memory(reports[6].packet, packets) and reports[6].seconds == 0.3
    assert (reports[4].model, reports[5].model, reports[5].buffers) == (0, None, None)
