"""A scheme is one module + one YAML: a toy scheme outside gclab runs through every path.

The module and its option file are written into a temporary package on ``sys.path``;
``hydra.searchpath=[pkg://<package>]`` makes Hydra import it (so the class registers and
the config layer derives its schema) and find ``scheme/<name>.yaml``. Nothing in gclab
names the toy scheme.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from hydra.errors import ConfigCompositionException

from gclab.app import run
from gclab.coding.contract import SCHEMES
from gclab.tracking.artifacts import read_metrics
from helpers.config import TINY, compose_config
from helpers.inprocess import in_process
from helpers.newscheme import simulate_cli

MODULE = '''"""Toy: fractional repetition in groups of s + 1, decoded by least squares."""

from typing import Any

import numpy as np

from gclab.coding.linear import LinearScheme


class Toy(LinearScheme):
    name = "toy"

    def __init__(self, n: int, s: int = 1) -> None:
        groups = np.arange(n) // (s + 1)
        self._init_linear(n, s, (groups[:, None] == groups[None, :]).astype(float))

    @classmethod
    def search_grid(cls, n: int, recovery: str) -> list[dict[str, Any]]:
        return [{"s": s} for s in range(n) if n % (s + 1) == 0]
'''

OPTION = """# Toy fractional repetition (tests/coding/test_new_scheme.py).
defaults:
  - /schema/scheme/toy@_here_
  - _self_

_target_: toy_gc.Toy
"""

SEARCHPATH = "hydra.searchpath=[pkg://toy_gc]"


@pytest.fixture
def toy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """``tmp_path/toy_gc``: the scheme module and ``scheme/toy.yaml``, importable."""
    package = tmp_path / "lib" / "toy_gc"
    (package / "scheme").mkdir(parents=True)
    (package / "__init__.py").write_text(MODULE)
    (package / "scheme" / "toy.yaml").write_text(OPTION)
    monkeypatch.syspath_prepend(str(package.parent))
    path = os.pathsep.join([str(package.parent), os.environ.get("PYTHONPATH", "")])
    monkeypatch.setenv("PYTHONPATH", path)  # the simulator's subprocess imports it too
    yield package.parent
    SCHEMES.pop("toy", None)
    sys.modules.pop("toy_gc", None)


def simulate(out: Path, *extra: str) -> dict:
    """``python -m gclab.sim`` on the toy scheme; its summary."""
    return simulate_cli("toy_gc", "toy", out, *extra)


@pytest.mark.slow
@pytest.mark.usefixtures("toy")
def test_a_toy_scheme_composes_simulates_searches_and_trains(tmp_path: Path) -> None:
    cfg = compose_config([SEARCHPATH, "scheme=toy", *TINY, "train.rounds=2"])
    assert cfg.scheme._target_ == "toy_gc.Toy" and cfg.scheme.s == 1  # the signature's default
    with pytest.raises(ConfigCompositionException):
        compose_config([SEARCHPATH, "scheme=toy", "scheme.sss=1"])  # typos fail at compose time
    with pytest.raises(ConfigCompositionException):
        compose_config([SEARCHPATH, "scheme=toy", "scheme.s=abc"])  # so do wrong types

    summary = simulate(tmp_path / "sim")
    assert summary["jobs"] == 20
    searched = simulate(tmp_path / "search", "sim.search=true")
    trials = json.loads((tmp_path / "search" / "search.json").read_text())
    assert sorted(t["params"]["s"] for t in trials) == [0, 1, 3]  # the toy's own grid
    assert searched["settings"] == 3

    summary = run(cfg, tmp_path / "train", start_pool=in_process)
    rounds = [r for r in read_metrics(tmp_path / "train" / "metrics.jsonl") if r["kind"] == "round"]
    assert len(rounds) == 2 and summary["scheme"] == "toy"


@pytest.mark.usefixtures("toy")
def test_a_searchpath_scheme_can_be_named_in_sim_schemes(tmp_path: Path) -> None:
    """``sim.schemes`` options are composed by Hydra in the app's search path: the toy,
    which only ``hydra.searchpath`` knows, is searched beside a built-in scheme."""
    summary = simulate(tmp_path / "search", "sim.search=true", "sim.schemes=[toy,uncoded]")
    assert set(summary["best"]) == {"toy", "uncoded"}
    assert summary["settings"] == 3 + 1  # the toy's grid (s = 0, 1, 3) and uncoded's one
    assert summary["best"]["toy"]["scheme"].startswith("toy(n=4, s=")
