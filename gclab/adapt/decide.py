"""The adaptive controller: when to decide, what the search says, and whether to switch.

At every ``adapt.every``-th job boundary, once ``adapt.window`` rounds were observed,
the controller builds the window's delay model (:mod:`gclab.adapt.observe`) and runs
the parameter search (:func:`gclab.sim.search.search`: the fast path for the SGC
papers' four schemes) over every candidate scheme's grid, simulating ``window`` jobs.
Among the settings within ``adapt.slack`` of the fastest it takes the one with the
highest load (the most redundancy), and switches to it when that beats the current one
on the window by more than ``adapt.margin``; the caller drains the old scheme first and
starts the new one at that boundary. A candidate without a grid is its option's one setting.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from typing import Any

from hydra.utils import get_class
from omegaconf import DictConfig

from gclab.adapt.observe import Observed, Window, load_slope
from gclab.adapt.options import Search
from gclab.coding.contract import Scheme
from gclab.errors import ConfigError
from gclab.network import DelayModel, NetworkConfig, RoundOutcome, RoundProtocol
from gclab.schemas import instantiate_checked
from gclab.sim.engine import simulate
from gclab.sim.fast import load_kernels
from gclab.sim.search import Trial, scheme_name, scheme_options, search


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
    return get_class(node._target_).search_grid(n, recovery)


@dataclass(frozen=True)
class Switch:
    """A switch: from job ``job`` on, scheme option ``name`` with ``params``."""

    job: int
    name: str
    params: dict[str, Any]
    scheme: str

    def record(self) -> dict[str, object]:
        return {"job": self.job, "scheme": self.name, "params": self.params, "setting": self.scheme}


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
        self.current = start
        self.switches: list[Switch] = []
        #: Wall seconds of each decision.
        self.seconds: list[float] = []

    def observe(self, outcome: RoundOutcome, protocol: RoundProtocol, scheme: Scheme) -> None:
        """Record a round the server ran with ``scheme``."""
        size = scheme.packet_fraction * protocol.links.payload
        self.window.add(outcome, protocol, scheme.load, size)

    def due(self, job: int) -> bool:
        """Whether the boundary before ``job`` is a decision point."""
        return job > 0 and job % self.policy.every == 0 and len(self.window) >= self.policy.window

    def decide(self, job: int, now: float) -> Scheme | None:
        """The scheme to run from job ``job`` on, or ``None`` to keep the current one.

        ``now`` is the server's clock at the boundary: what arrives later is not known.
        """
        begin = time.perf_counter()
        model = self.window.model(now, self.slope)
        network = replace(self.network, server_time=self.window.server_time())
        args = (model, network, self.policy.window, self.seed, 0.0, self.payload)
        trials: list[Trial] = []
        for node in self.nodes.values():
            own = None if _settings(node, self.n, self.network.recovery) else [{}]
            trials += search(node, self.n, *args, own)
        times = {id(t): t.result.total_time for t in trials}
        bound = (1 + self.policy.slack) * min(times.values())
        near = [t for t in trials if times[id(t)] <= bound]
        best = max(near, key=lambda t: (t.result.load, -times[id(t)]))
        name = self.current.describe()
        now_trial = next((t for t in trials if t.result.scheme == name), None)
        if now_trial is None:  # the configured setting is off the grids
            current = simulate(self.current, *args).total_time
        else:
            current = times[id(now_trial)]
        chosen = None
        if best.result.scheme != name and times[id(best)] < (1 - self.policy.margin) * current:
            chosen = instantiate_checked(self.nodes[best.name], n=self.n, **best.params)
            self.switches.append(Switch(job, best.name, best.params, chosen.describe()))
            self.current = chosen
        self.seconds.append(time.perf_counter() - begin)
        return chosen

    def state_dict(self) -> dict[str, object]:
        """The window, the switches and the decision times, for a checkpoint."""
        return {
            "window": [vars(o) for o in self.window.rounds],
            "switches": [s.record() for s in self.switches],
            "seconds": list(self.seconds),
        }

    def load_state_dict(self, state: dict) -> Scheme | None:
        """Continue from :meth:`state_dict`; the scheme switched to last, if any."""
        self.window.rounds.clear()
        self.window.rounds.extend(Observed(**o) for o in state["window"])
        self.switches = [
            Switch(s["job"], s["scheme"], dict(s["params"]), s["setting"])
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
