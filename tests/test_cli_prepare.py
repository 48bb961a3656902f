"""The command line as both apps prepare it before Hydra (no subprocess, no Ray)."""

import re

import pytest

from gclab.cli import prepare
from gclab.errors import ConfigError


@pytest.mark.parametrize("app", ["config", "sim"])
def test_a_key_shared_by_the_swept_schemes_is_handed_to_every_job(app: str) -> None:
    argv = ["gclab", "-m", "scheme=classic_cr,pipelined_cr", "scheme.s=1", "seed=2"]
    got = prepare(argv, app)
    assert got == ["gclab", "-m", "scheme=classic_cr,pipelined_cr", "scheme.s=choice(1)", "seed=2"]


def test_swept_shared_keys_and_other_groups_are_left_alone() -> None:
    argv = ["gclab", "--multirun", "scheme=pipelined_cr,pipelined_fr", "scheme.T=1,2",
            "delay=bernoulli", "delay.p=0.1"]  # fmt: skip
    assert prepare(argv, "config") == argv


def test_single_runs_are_left_to_hydra() -> None:
    argv = ["gclab", "scheme=classic_cr", "scheme.s=1"]
    assert prepare(argv, "config") is argv


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["scheme=classic_cr,uncoded", "scheme.s=1"],
         "scheme=uncoded has no key 's', so scheme.s=1 cannot apply to every job of the "
         "sweep; leave uncoded out of scheme=... or drop scheme.s."),
        (["scheme=pipelined_cr,classic_cr", "scheme.T=1,2"],
         "scheme=classic_cr has no key 'T', so scheme.T=1,2 cannot apply to every job of the "
         "sweep; leave classic_cr out of scheme=... or drop scheme.T."),
        (["delay=bernoulli,straggler", "delay.p=0.1"],
         "delay=straggler has no key 'p', so delay.p=0.1 cannot apply"),
    ],
)  # fmt: skip
def test_a_key_one_swept_option_lacks_fails_in_one_sentence(overrides, message) -> None:
    with pytest.raises(ConfigError) as info:
        prepare(["gclab", "-m", *overrides], "config")
    assert str(info.value).startswith(message)
    assert "\n" not in str(info.value) and str(info.value).endswith(".")


@pytest.mark.parametrize("multirun", [[], ["-m"]])
def test_a_launcher_that_does_not_exist_fails_in_one_sentence(multirun: list[str]) -> None:
    with pytest.raises(ConfigError) as info:
        prepare(["gclab", *multirun, "hydra/launcher=nope"], "sim")
    assert re.fullmatch(
        r"hydra/launcher=nope is not an installed Hydra launcher; valid: .*basic.*\.",
        str(info.value),
    )
