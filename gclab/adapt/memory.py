"""How long to remember: every setting's cost per round, and memories of several lengths.

At each decision the search replays the observation window and yields, for every
setting, what each of the window's rounds would have cost it. :class:`Memories` keeps
those costs round by round for the last ``max(lengths)`` rounds; a round's costs are
revised at every decision while it is in the window (a packet in flight at one decision
has arrived at the next) and kept as last revised once it has left.

Each *memory* of length ``m`` scores a setting by its cost over the last ``m`` rounds and
picks the best (:meth:`Memories.picks`). Which memory to trust is learned from how the
memories' own picks did: a memory is charged, for every round, what the round cost the
setting it had picked at the decision before the round ran, with weights halving every
``judge`` rounds into the past, and the memory charged least is trusted (among those
within a margin of the least, the longest). While the regime holds, long memories,
which average over more rounds, pick better; after a change, short ones catch up
first, and the controller follows them until the long ones have seen enough of the new
regime.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


class Memories:
    """Per-round costs of every setting seen, and the memories' picks (module docstring)."""

    def __init__(self, lengths: Sequence[int], judge: float) -> None:
        self.lengths = list(lengths)
        self.judge = float(judge)
        #: Setting description → column of :attr:`costs`.
        self.columns: dict[str, int] = {}
        self.loads: list[float] = []
        #: ``[rounds, settings]`` seconds: what each kept round cost each setting (0 where
        #: no decision has told yet: the same for every setting).
        self.costs = np.zeros((0, 0))
        #: ``[rounds, memories]``: the column each memory had picked when the round ran
        #: (−1 before the first decision).
        self.chosen = np.zeros((0, len(self.lengths)), dtype=np.int64)
        self.picked = np.full(len(self.lengths), -1, dtype=np.int64)

    def add_round(self) -> None:
        """A round ran: keep a row for it (its costs come with the next decision)."""
        self.costs = np.vstack([self.costs, np.zeros((1, self.costs.shape[1]))])
        self.chosen = np.vstack([self.chosen, self.picked[None]])
        if len(self.chosen) > max(self.lengths):
            self.costs, self.chosen = self.costs[1:], self.chosen[1:]

    def column(self, setting: str, load: float) -> int:
        """The column of ``setting`` (a new one for a setting not seen before)."""
        if setting not in self.columns:
            self.columns[setting] = len(self.loads)
            self.loads.append(float(load))
            self.costs = np.hstack([self.costs, np.zeros((len(self.costs), 1))])
        return self.columns[setting]

    def revise(self, columns: np.ndarray, costs: np.ndarray) -> None:
        """The last ``len(costs)`` rounds' costs ``[rounds, len(columns)]`` as now known."""
        rounds = min(len(costs), len(self.costs))
        self.costs[-rounds:, columns] = costs[-rounds:]

    def scores(self) -> np.ndarray:
        """``[memories, settings]``: each setting's cost over each memory's rounds."""
        return np.stack([self.costs[-length:].sum(axis=0) for length in self.lengths])

    def picks(self, scores: np.ndarray, live: np.ndarray, slack: float) -> np.ndarray:
        """Each memory's pick among the columns ``live`` (those searched now): of the
        settings within ``slack`` of its fastest, the one with the highest load (the most
        redundancy), then the fastest. The picks hold for the rounds until the next
        decision."""
        loads = np.asarray(self.loads)[live]
        picks = np.empty(len(self.lengths), dtype=np.int64)
        for i, score in enumerate(scores[:, live]):
            near = np.flatnonzero(score <= (1 + slack) * score.min())
            picks[i] = live[near[np.lexsort((score[near], -loads[near]))[0]]]
        self.picked = picks
        return picks

    def trusted(self, margin: float = 0.0) -> int:
        """The memory whose picks cost least on the rounds they held for (discounted by
        ``judge``); before any pick has held a round, and among those charged within
        ``margin`` of the least, the longest: a shorter memory takes over only when its
        picks did clearly better, not on a difference of noise."""
        held = np.flatnonzero(self.chosen[:, 0] >= 0)
        if not held.size:
            return int(np.argmax(self.lengths))
        age = len(self.chosen) - 1 - held
        weight = 0.5 ** (age / self.judge)
        charged = np.array(
            [
                (weight * self.costs[held, self.chosen[held, i]]).sum()
                for i in range(len(self.lengths))
            ]
        )
        best = np.flatnonzero(charged <= (1 + margin) * charged.min())
        return int(best[np.argmax(np.asarray(self.lengths)[best])])

    def state_dict(self) -> dict[str, object]:
        """Everything kept, for a checkpoint."""
        return {
            "columns": dict(self.columns),
            "loads": list(self.loads),
            "costs": self.costs.copy(),
            "chosen": self.chosen.copy(),
            "picked": self.picked.copy(),
        }

    def load_state_dict(self, state: dict) -> None:
        """Continue from :meth:`state_dict`."""
        self.columns = dict(state["columns"])
        self.loads = list(state["loads"])
        self.costs = np.array(state["costs"], dtype=np.float64)
        self.chosen = np.array(state["chosen"], dtype=np.int64)
        self.picked = np.array(state["picked"], dtype=np.int64)
