"""Domain errors name the parameter, the config layer names the key the user typed.

A constructor raises ``ConfigError("p=2 ...", param="p")``; ``instantiate_checked``
qualifies it with the node's key (``delay.p=2``, in a nested slot ``delay.loss.p=2``).
A value that is not one of its key's choices (an Enum field) fails when Hydra composes
the config, and the CLI says so in one sentence naming the key, the value and the choices.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
from hydra.errors import ConfigCompositionException
from omegaconf import OmegaConf

import gclab.sim.config  # noqa: F401  (the simulator's schema)
from gclab.cli import one_line
from gclab.coding.classic import ClassicCR
from gclab.errors import ConfigError, under
from gclab.schemas import instantiate_checked, instantiate_scheme
from helpers.config import compose_config


class Unconverted:
    """A constructor whose message already spells the full key (``param`` not given)."""

    def __init__(self, s: int = 0) -> None:
        raise ConfigError(f"scheme.s={s} needs s < n.")


def test_under_qualifies_the_parameter_and_leaves_full_keys_alone() -> None:
    error = ConfigError("p=2.0 is invalid: it must be a probability in [0, 1].", param="p")
    nested = error.under("loss").under("delay")
    assert str(nested) == "delay.loss.p=2.0 is invalid: it must be a probability in [0, 1]."
    assert nested.param == "delay.loss.p"
    assert error.under("") is error  # a node outside a config tree
    full = ConfigError("scheme.s=5 needs s < n.")
    assert full.under("scheme") is full
    with pytest.raises(ValueError, match="must start its message"):
        ConfigError("the value p=2 is invalid.", param="p")


def test_under_qualifies_every_parameter_a_message_names() -> None:
    """``also``: the first ``name=`` of each other parameter, whole keys only (``lam=``
    is not ``m=``), at every level; values that repeat later stay as they are."""
    error = ConfigError(
        "lam=2, m=3 needs lam + m <= n but n=4; valid m for lam=2: 1, 2.", param="lam", also=("m",)
    )
    nested = error.under("cce").under("schemes")
    assert str(nested) == (
        "schemes.cce.lam=2, schemes.cce.m=3 needs lam + m <= n but n=4; valid m for lam=2: 1, 2."
    )
    assert (nested.param, nested.also) == ("schemes.cce.lam", ("schemes.cce.m",))
    with pytest.raises(ValueError, match="must be named"):
        ConfigError("s=1 needs more.", param="s", also=("m",))
    with pytest.raises(ValueError, match="must be named"):
        ConfigError("s=1, lam=2 needs more.", param="s", also=("m",))


def test_under_reraises_a_domain_error_with_the_key() -> None:
    with pytest.raises(ConfigError, match=r"^network\.mu=-1 is invalid\.$"), under("network"):
        raise ConfigError("mu=-1 is invalid.", param="mu")


def test_a_message_that_spells_its_key_is_not_prefixed_again() -> None:
    cfg = OmegaConf.create({"scheme": {"_target_": f"{__name__}.Unconverted", "s": 5}})
    with pytest.raises(ConfigError) as info:
        instantiate_checked(cfg.scheme)
    assert str(info.value) == "scheme.s=5 needs s < n."


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["delay=bernoulli", "delay.p=2"], "delay.p=2.0 is invalid"),
        (["delay=composite", "delay.loss.p=2"], "delay.loss.p=2.0 is invalid"),
        (
            ["delay=composite", "delay@delay.compute=trace", "delay.compute.path=/nonexistent.npz"],
            "delay.compute.path='/nonexistent.npz' is not a file",
        ),
        (
            ["delay=composite", "delay@delay.compute=gilbert_elliott"],
            "delay.compute.p_good_bad and p_bad_good, or loss_rate and burst_length: the chain",
        ),
    ],
    ids=["top-level", "composite-part", "composite-trace-part", "composite-part-two-keys"],
)
def test_a_domain_error_names_the_full_key(overrides: list[str], message: str) -> None:
    cfg = compose_config(overrides)
    with pytest.raises(ConfigError) as info:
        instantiate_checked(cfg.delay)
    assert str(info.value).startswith(message), str(info.value)


@pytest.mark.parametrize("workers", [0, -3])
def test_a_bad_worker_count_names_cluster_workers_not_the_schemes_n(workers: int) -> None:
    cfg = compose_config(["scheme=classic_cr", f"cluster.workers={workers}"])
    with pytest.raises(ConfigError) as info:
        instantiate_scheme(cfg)
    assert str(info.value) == f"cluster.workers={workers} is invalid: it must be an integer >= 1."
    with pytest.raises(ConfigError) as info:  # built directly, the scheme names its parameter
        ClassicCR(workers, 1)
    assert str(info.value) == f"n={workers} is invalid: it must be an integer >= 1."


def literals(source: str) -> list[str]:
    """The string literals of ``source`` (f-strings' literal parts too), less docstrings."""
    tree = ast.parse(source)
    scopes = (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, scopes) and node.body and isinstance(node.body[0], ast.Expr)
    }
    return [
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str)
        if id(node) not in docstrings
    ]


def test_coding_and_network_spell_no_config_key() -> None:
    """The domain packages know their parameters, not where the config puts them."""
    key = re.compile(r"\b(?:cluster|scheme|delay|network|sim|train)\.\w+=")
    package = Path(__file__).resolve().parents[1] / "gclab"
    found = [
        f"{path.relative_to(package)}: {text!r}"
        for folder in ("coding", "network")
        for path in sorted((package / folder).rglob("*.py"))
        for text in literals(path.read_text())
        if key.search(text)
    ]
    assert found == []


def test_a_composite_part_that_fails_the_run_check_names_the_full_key() -> None:
    cfg = compose_config(["delay=composite", "delay.compute.slow_workers=9"])
    delay = instantiate_checked(cfg.delay)
    with pytest.raises(ConfigError) as info, under("delay"):
        delay.check(4, 10)
    assert str(info.value) == "delay.compute.slow_workers=9 is invalid: the run has only 4 workers."


CHOICES = [
    (
        ["network.policy=first"],
        "network.policy='first' is invalid: it must be one of deadline, all.",
    ),
    (["network.clock=bogus"], "network.clock='bogus' is invalid: it must be one of virtual, wall."),
    (
        ["network.recovery=sometimes"],
        "network.recovery='sometimes' is invalid: it must be one of decodable, wait_all, partial.",
    ),
    (
        ["cluster.compute_time=gpu"],
        "cluster.compute_time='gpu' is invalid: it must be one of auto, cpu, cuda, wall.",
    ),
    (
        ["cluster.placement=diagonal"],
        "cluster.placement='diagonal' is invalid: it must be one of pack, spread.",
    ),
    (["cluster.device=tpu"], "cluster.device='tpu' is invalid: it must be one of auto, cpu, cuda."),
    (
        ["cluster.server_device=tpu"],
        "cluster.server_device='tpu' is invalid: it must be one of auto, cpu, cuda.",
    ),
    (
        ["logger=wandb", "logger.mode=loud"],
        "logger.mode='loud' is invalid: it must be one of auto, online, offline, disabled.",
    ),
    (
        ["delay=trace", "delay.beyond=loop"],
        "delay.beyond='loop' is invalid: it must be one of wrap, error.",
    ),
    (
        ["delay=composite", "delay@delay.compute=trace", "delay.compute.beyond=loop"],
        "delay.compute.beyond='loop' is invalid: it must be one of wrap, error.",
    ),
    (
        ["train.schedule=linear"],
        "train.schedule='linear' is invalid: it must be one of constant, cosine, step.",
    ),
]


@pytest.mark.parametrize(
    ("overrides", "sentence"), CHOICES, ids=[o[-1].split("=")[0] for o, _ in CHOICES]
)
def test_a_bad_choice_fails_at_compose_time_in_one_sentence(
    overrides: list[str], sentence: str
) -> None:
    with pytest.raises(ConfigCompositionException) as info:
        compose_config(overrides)
    assert one_line(info.value) == sentence


def test_a_bad_choice_fails_the_simulator_at_compose_time_too() -> None:
    with pytest.raises(ConfigCompositionException) as info:
        compose_config(["network.policy=first"], name="sim")
    assert one_line(info.value) == (
        "network.policy='first' is invalid: it must be one of deadline, all."
    )
