"""The simulator's config schema (``gclab/conf/sim.yaml`` extends it) and where configs live.

The simulator composes the same ``scheme`` and ``delay`` groups as training, but not
the ``cluster`` group (that builds Ray): it only needs ``cluster.workers``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from hydra.core.config_store import ConfigStore
from omegaconf import MISSING

import gclab.adapt.options  # (registers the adapt options' schemas)
import gclab.schemas  # noqa: F401  (the scheme and delay options' schemas)
from gclab.network import NetworkConfig
from gclab.sim.engine import PAYLOAD_BYTES


@dataclass
class SimOptions:
    jobs: int = 100  # J: jobs to simulate (in at most J + T rounds)
    search: bool = False  # evaluate the scheme's whole parameter grid (gclab/sim/search.py)
    # compute seconds per unit load added to every worker's delay; null: 2.2 (a whole batch
    # gradient takes the shared Lambda traces' median at load 1, 2.197 s: `python
    # bench/trace_medians.py`), or 0 when the delay model's draws are the compute time
    # (delay=trace, or a composite with one), which they would count twice
    unit_time: float | None = None
    # bytes of one full gradient; a packet carries scheme.packet_fraction of it (default: the
    # small CNN's, model=cnn); it costs time where network.*bandwidth is set
    payload_bytes: float = PAYLOAD_BYTES
    grid: list[dict[str, Any]] | None = None  # with search: these settings, not the full grid
    # with search: search these scheme options' grids together (e.g. [uncoded,classic_cr,
    # sr_sgc,m_sgc], the SGC papers' four) instead of the one `scheme`
    schemes: list[str] | None = None


@dataclass
class SimCluster:
    workers: int = 8  # n: logical workers the scheme codes for


@dataclass
class SimConfig:
    seed: int = 0
    network: NetworkConfig = field(default_factory=NetworkConfig)
    cluster: SimCluster = field(default_factory=SimCluster)
    sim: SimOptions = field(default_factory=SimOptions)
    scheme: Any = MISSING
    delay: Any = MISSING
    adapt: Any = MISSING  # adaptive coding (gclab/adapt/options.py): off or search
    paths: Any = MISSING  # data, trace and output roots (gclab/conf/paths/default.yaml)


ConfigStore.instance().store(name="sim_schema", node=SimConfig)
