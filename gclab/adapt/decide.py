"""The adaptive controller: when to decide, what the search says, and whether to switch.

A decision is due at every ``adapt.every``-th job boundary, and at the boundary after a
round that waited (news: the current setting did not cover what the round brought),
once ``adapt.window`` rounds were observed. The controller then builds the window's
delay model (:mod:`gclab.adapt.observe`), runs the parameter search
(:func:`gclab.sim.search.search`: the fast path for the SGC papers' four schemes) over
every candidate scheme's grid on it, simulating ``window`` jobs, and takes from it what
each of the window's rounds would have cost each setting. Those costs go into
:class:`~gclab.adapt.memory.Memories`, which scores every setting over the last
``m`` rounds for each length ``m`` of ``adapt.memories`` and trusts the memory whose
earlier picks did best. The trusted memory's pick (the most redundant setting within
``adapt.slack`` of its fastest) replaces the current setting at once when it is more
redundant, and when it beats it on that memory by more than ``adapt.margin`` when it is
less redundant (:meth:`Controller._switch`); the caller drains the old scheme first and starts
the new one at that boundary. A candidate without a grid is its option's one setting.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
from hydra.utils import get_class
from omegaconf import DictConfig

from gclab.adapt.memory import Memories
from gclab.adapt.observe import Observed, Window, load_slope
from gclab.adapt.options import Search
from gclab.coding.contract import Scheme
from gclab.errors import ConfigError
from gclab.network import DelayModel, NetworkConfig, RoundOutcome, RoundProtocol
from gclab.schemas import instantiate_checked
from gclab.sim.engine import simulate
from gclab.sim.fast import load_kernels
from gclab.sim.search import class_grid, scheme_name, scheme_options, search


def controller(
    cfg: DictConfig,
    scheme: Scheme,
    delay: DelayModel,
    network: NetworkConfig,
    payload: float,
    jobs: int,
    jobs_key: str,
) -> Controller | None:
    """The run's controller from its config (``None`` with ``adapt=off``); every bad
    ``adapt`` value raises :class:`ConfigError` here, before anything starts. The fast
    search's compiled kernels are loaded here too (start-up, not decision time).

    ``jobs`` is the run's number of jobs, which ``jobs_key`` set.
    """
    policy = instantiate_checked(cfg.adapt)
    if not policy.enabled:
        return None
    policy.check(jobs, jobs_key)
    if network.recovery == "partial":
        raise ConfigError(
            "adapt=search does not combine with network.recovery=partial: a partial round "
            "drops what the search's model of the round would wait for; use decodable or "
            "wait_all with adaptation."
        )
    nodes = candidates(policy, cfg.scheme, scheme.n)
    load_kernels(nodes, network)  # start-up: decide_seconds times the decisions alone
    return Controller(policy, nodes, scheme, delay, network, cfg.seed, payload)


def candidates(policy: Search, configured: DictConfig, n: int) -> dict[str, DictConfig]:
    """The scheme configs to choose among, by scheme name: ``adapt.schemes``, else the
    configured scheme's family. Each is built once at ``n`` so that a bad one fails now."""
    if policy.schemes is None:
        nodes = [configured]
    else:
        nodes = scheme_options(list(policy.schemes), "adapt.schemes")
    chosen = {scheme_name(node): node for node in nodes}
    for node in chosen.values():  # errors read scheme.<param> or adapt.schemes.<name>.<param>
        instantiate_checked(node, n=n)
    return chosen


def require_static(nodes: dict[str, DictConfig], n: int) -> None:
    """Training switches between schemes without jobs in flight (``T = 0``): refuse others."""
    for name, node in nodes.items():
        T = instantiate_checked(node, n=n).T
        if T:
            raise ConfigError(
                f"adapt=search in training chooses among schemes with T = 0 (uncoded, classic "
                f"and CCE codes); {name} has T = {T}, jobs that end in later rounds: leave it "
                "out of adapt.schemes (the simulator adapts across every scheme)."
            )


def _settings(node: DictConfig, n: int, recovery: str) -> list[dict[str, Any]] | None:
    """The scheme's grid, or ``None`` when it has none (its one setting is searched)."""
    return class_grid(get_class(node._target_), n, recovery)


@dataclass(frozen=True)
class Switch:
    """A switch: from job ``job`` on, scheme option ``name`` with ``params``."""

    job: int
    name: str
    params: dict[str, Any]
    scheme: str
    #: The length, in rounds, of the memory whose pick it was.
    memory: int

    def record(self) -> dict[str, object]:
        return {
            "job": self.job, "scheme": self.name, "params": self.params, "setting": self.scheme,
            "memory": self.memory,
        }  # fmt: skip


class Controller:
    """Observes rounds and decides at job boundaries (module docstring)."""

    def __init__(
        self,
        policy: Search,
        nodes: dict[str, DictConfig],
        start: Scheme,
        delay: DelayModel,
        network: NetworkConfig,
        seed: int,
        payload: float,
    ) -> None:
        self.policy = policy
        self.nodes = nodes
        self.n = start.n
        self.network = network
        self.seed = seed
        self.payload = payload
        #: Seconds of delay per unit load the delay model states (0: none).
        self.slope = load_slope(delay)
        self.window = Window(policy.window)
        self.memories = Memories(policy.memories, policy.judge)
        #: Per candidate: ``None`` to search its grid, ``[{}]`` for its one setting.
        self.own = {
            name: None if _settings(node, self.n, network.recovery) else [{}]
            for name, node in nodes.items()
        }
        self.current = start
        #: Whether the last round observed waited.
        self.waited = False
        self.switches: list[Switch] = []
        #: Wall seconds of each decision.
        self.seconds: list[float] = []

    def observe(self, outcome: RoundOutcome, protocol: RoundProtocol, scheme: Scheme) -> None:
        """Record a round the server ran with ``scheme``."""
        size = scheme.packet_fraction * protocol.links.payload
        self.window.add(outcome, protocol, scheme.load, size)
        self.memories.add_round()
        self.waited = bool(outcome.waited)

    def due(self, job: int) -> bool:
        """Whether the boundary before ``job`` is a decision point."""
        if job <= 0 or len(self.window) < self.policy.window:
            return False
        return self.waited or job % self.policy.every == 0

    def decide(self, job: int, now: float) -> Scheme | None:
        """The scheme to run from job ``job`` on, or ``None`` to keep the current one.

        ``now`` is the server's clock at the boundary: what arrives later is not known.
        """
        begin = time.perf_counter()
        model = self.window.model(now, self.slope)
        network = replace(self.network, server_time=self.window.server_time())
        rounds = self.policy.window
        args = (model, network, rounds, self.seed, 0.0, self.payload)
        trials = [
            t
            for name, node in self.nodes.items()
            for t in search(node, self.n, *args, self.own[name])
        ]
        results = [(t.result, t) for t in trials]
        name = self.current.describe()
        if all(t.result.scheme != name for t in trials):  # the configured setting is off the grids
            results.append((simulate(self.current, *args), None))
        memory = self.memories
        columns = np.array([memory.column(r.scheme, r.load) for r, _ in results])
        costs = np.zeros((rounds, len(results)))
        for i, (result, _) in enumerate(results):  # the window's rounds; not the drain after
            ran = result.index < rounds
            costs[result.index[ran], i] = result.durations[ran]
        memory.revise(columns, costs)
        scores = memory.scores()
        picks = memory.picks(scores, columns[: len(trials)], self.policy.slack)
        trusted = memory.trusted(self.policy.margin)
        best, current = picks[trusted], memory.columns[name]
        chosen = None
        if best != current and self._switch(scores[trusted], best, current):
            trial = trials[int(np.flatnonzero(columns == best)[0])]
            chosen = instantiate_checked(self.nodes[trial.name], n=self.n, **trial.params)
            length = memory.lengths[trusted]
            self.switches.append(Switch(job, trial.name, trial.params, chosen.describe(), length))
            self.current = chosen
        self.seconds.append(time.perf_counter() - begin)
        return chosen

    def _switch(self, score: np.ndarray, best: int, current: int) -> bool:
        """Whether to leave the column ``current`` for the pick ``best`` on the trusted
        memory's ``score``. A more redundant pick is taken at once: it is within
        ``adapt.slack`` of the fastest, the price the slack rule pays against stragglers
        not seen yet. A less redundant one must be faster by more than ``adapt.margin``:
        the hysteresis keeps noise from trading redundancy away."""
        if self.memories.loads[best] > self.memories.loads[current]:
            return True
        return score[best] < (1 - self.policy.margin) * score[current]

    def state_dict(self) -> dict[str, object]:
        """The window, the memories, the switches and the decision times, for a checkpoint."""
        return {
            "window": [vars(o) for o in self.window.rounds],
            "waited": self.waited,
            "memories": self.memories.state_dict(),
            "switches": [s.record() for s in self.switches],
            "seconds": list(self.seconds),
        }

    def load_state_dict(self, state: dict) -> Scheme | None:
        """Continue from :meth:`state_dict`; the scheme switched to last, if any."""
        self.window.rounds.clear()
        self.window.rounds.extend(Observed(**o) for o in state["window"])
        self.waited = bool(state["waited"])
        self.memories.load_state_dict(state["memories"])
        self.switches = [
            Switch(s["job"], s["scheme"], dict(s["params"]), s["setting"], s["memory"])
            for s in state["switches"]
        ]
        self.seconds = list(state["seconds"])
        if not self.switches:
            return None
        last = self.switches[-1]
        self.current = instantiate_checked(self.nodes[last.name], n=self.n, **last.params)
        return self.current

    def summary(self) -> dict[str, object]:
        """The adaptation's record for ``summary.json``."""
        seconds = self.seconds or [0.0]
        return {
            "switches": [s.record() for s in self.switches],
            "decisions": len(self.seconds),
            "decide_seconds": float(sum(self.seconds)),
            "decide_seconds_max": float(max(seconds)),
        }
