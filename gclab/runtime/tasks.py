"""An actor's tasks of one round: each distinct one computed once, charged to every
logical worker that plans it.

Logical workers that hold the same partition compute the same partial gradient of a job
(the same weights, the same samples). A classic code at n = 256, s = 12 plans 13 tasks
per worker, but an actor hosting 128 neighbouring workers needs only 140 distinct ones.
:class:`RoundTasks` computes each once and times it on the workers' clock
(:class:`gclab.runtime.timing.Stopwatch`). It charges every logical worker what its own
weight loads and tasks took, in its own order, which is what that worker would spend on
a core of its own, whichever worker of the actor happened to compute a task first. So
the virtual clock does not depend on how workers are packed into actors. A gradient is
dropped once the last worker that plans it has taken it.

Models with float buffers (batch norm) are the exception. A forward pass updates their
running statistics, so a worker's buffers depend on its own sequence of tasks. There
every worker computes its own tasks from the broadcast state, as it did on its own.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Hashable, Mapping
from dataclasses import dataclass

import numpy as np

from gclab.coding.contract import Part, Task
from gclab.ml.gradients import BatchMaker, FlatModel, loss_and_gradient, to_host
from gclab.runtime.timing import Stopwatch


@dataclass
class Computed:
    """One task's partial gradient (on the host), its loss sum, samples and compute time."""

    gradient: np.ndarray
    loss: float
    samples: int
    seconds: float


@dataclass
class Charged:
    """What one logical worker's tasks of the round gave it and cost it."""

    partials: dict[Task, np.ndarray]
    seconds: float  # its weight loads and tasks, without encoding
    loss_sum: float
    samples: int
    model: int | None  # the model of its last real task (None: only drain tasks)


class RoundTasks:
    """Computes the tasks ``plans`` names for an actor's logical workers in one round,
    each distinct one once.

    ``weights[t]`` is the state job t is computed on (every trained model's, concatenated);
    job t trains model ``t mod models``. Tasks of jobs ``>= num_jobs`` (the drain rounds of
    pipelined schemes) are zeros and cost nothing.
    """

    def __init__(
        self,
        flat: FlatModel,
        batches: BatchMaker,
        parts: tuple[Part, ...],
        stopwatch: Stopwatch,
        weights: Mapping[int, np.ndarray],
        plans: Mapping[int, tuple[Task, ...]],
        models: int,
        num_jobs: int,
        bf16: bool,
    ) -> None:
        self.flat, self.batches, self.parts, self.stopwatch = flat, batches, parts, stopwatch
        self.weights, self.models, self.num_jobs, self.bf16 = weights, models, num_jobs, bf16
        #: whether workers share computed tasks (no float buffers: see the module docstring)
        self.shared = flat.num_buffers == 0
        self.zero = np.zeros(flat.num_params, dtype=np.float32)
        self.uses = Counter(
            self._key(w, task) for w, tasks in plans.items() for task in tasks if self._real(task)
        )
        self.done: dict[Hashable, Computed] = {}
        self.loaded: Hashable | None = None  # what the model holds: (owner, job)
        self.load_seconds: dict[Hashable, float] = {}  # (owner, job) -> its last load's time
        #: distinct tasks computed and weight loads done in this round (what sharing saves)
        self.computed = 0
        self.loads = 0

    def _real(self, task: Task) -> bool:
        return task.job < self.num_jobs

    def _owner(self, w: int) -> int | None:
        """Whose computation a result belongs to: anyone's (None) when shared, else ``w``'s."""
        return None if self.shared else w

    def _key(self, w: int, task: Task) -> Hashable:
        return (self._owner(w), task)

    def take(self, w: int, tasks: tuple[Task, ...]) -> Charged:
        """Worker ``w``'s partial gradients of ``tasks``, and what they cost it.

        Computes the tasks no worker of this actor has computed yet. ``w`` is charged a
        load of the weights at every change of job along ``tasks`` (as it would load
        them on its own) and each task's measured time.
        """
        partials, seconds, loss_sum, samples = {}, 0.0, 0.0, 0
        current, model = None, None  # the job whose weights w holds; its last task's model
        for task in tasks:
            if not self._real(task):
                partials[task] = self.zero
                continue
            key = self._key(w, task)
            result = self.done.get(key)
            if result is None:
                result = self.done[key] = self._compute(self._owner(w), task)
            if task.job != current:
                seconds += self.load_seconds[self._owner(w), task.job]
                current = task.job
            partials[task] = result.gradient
            seconds += result.seconds
            loss_sum, samples = loss_sum + result.loss, samples + result.samples
            model = task.job % self.models
        return Charged(partials, seconds, loss_sum, samples, model)

    def release(self, w: int, tasks: tuple[Task, ...]) -> None:
        """Worker ``w`` has encoded ``tasks``: drop the gradients no other worker needs."""
        for task in tasks:
            if self._real(task):
                key = self._key(w, task)
                self.uses[key] -= 1
                if self.uses[key] == 0:
                    del self.done[key]

    def _compute(self, owner: int | None, task: Task) -> Computed:
        """One task on the weights of its job, timed; loads them first if the model holds
        other weights (or, unshared, another worker's state)."""
        if self.loaded != (owner, task.job):
            self.stopwatch.start()
            state = self.weights[task.job].reshape(self.models, -1)[task.job % self.models]
            self.flat.load_state_vector(state)
            self.stopwatch.host_part()
            self.load_seconds[owner, task.job] = self.stopwatch.stop()
            self.loaded = (owner, task.job)
            self.loads += 1
        self.stopwatch.start()
        x, y = self.batches(task.job, self.parts[task.part])
        loss, grad = loss_and_gradient(self.flat, x, y, self.bf16)
        grad = to_host(grad)  # on a GPU: a copy to pinned memory, waited for below
        self.stopwatch.host_part()
        seconds = self.stopwatch.stop()
        self.computed += 1
        return Computed(np.asarray(grad), float(loss), len(y), seconds)
