"""Config composition and validation: every option composes, bad values fail early."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hydra.errors import ConfigCompositionException as HydraCompositionError

from gclab import CONF_DIR
from gclab.app import build, run
from gclab.errors import ConfigError
from helpers.config import TINY, compose_config
from helpers.inprocess import in_process

GROUPS = ["scheme", "model", "data", "cluster", "delay", "logger"]


def options(group: str) -> list[str]:
    return sorted(p.stem for p in (CONF_DIR / group).glob("*.yaml"))


@pytest.mark.parametrize(("group", "option"), [(g, o) for g in GROUPS for o in options(g)])
def test_every_group_option_composes_with_a_target(group, option):
    overrides = [f"{group}={option}"]
    if group == "data" and option == "image_folder":
        overrides.append("data.root=/somewhere")
    cfg = compose_config(overrides)
    assert cfg[group]._target_.split(".")[0] in {"gclab", "torch", "torchvision"}


def test_misspelt_key_fails_at_compose_time():
    with pytest.raises(HydraCompositionError, match="lrr"):
        compose_config(["train.lrr=0.1"])
    with pytest.raises(HydraCompositionError, match="width"):
        compose_config(["model=resnet18", "model.width=3"])


def test_secrets_cannot_come_from_the_config():
    """W&B reads its API key from the environment only: the schema has no place for one."""
    with pytest.raises(HydraCompositionError, match="api_key"):
        compose_config(["logger=wandb", "logger.api_key=secret"])


def test_wrong_type_fails_at_compose_time():
    with pytest.raises(HydraCompositionError, match="batch_size"):
        compose_config(["train.batch_size=lots"])
    with pytest.raises(HydraCompositionError, match="schedule"):
        compose_config(["train.schedule=linear"])
    with pytest.raises(HydraCompositionError, match="stale_lr"):
        compose_config(["train.stale_lr=halved"])


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("cluster.workers=0", r"cluster\.workers=0 is invalid"),
        ("cluster.actors=9", r"cluster\.actors=9 is invalid.*between 1 and"),
        ("train.lr=-0.1", r"train\.lr=-0\.1 is invalid"),
        ("train.momentum=1.5", r"train\.momentum=1\.5"),
        (
            "train.batch_size=30",
            r"train\.batch_size=30 is not divisible by the 4 data shards.*28 or 32",
        ),
        ("train.batch_size=4096", r"train\.batch_size=4096 needs 1024 samples .* only 128"),
        ("train.epochs=0", r"train\.epochs=0"),
        ("train.eval_every=-1", r"train\.eval_every=-1"),
        ("train.target_accuracy=1.5", r"train\.target_accuracy=1\.5"),
        ("train.stop_at_target=true", r"train\.stop_at_target=true needs a train\.target_acc"),
        (
            "train.stop_at_target=true train.target_accuracy=0.5",
            r"stop_at_target=true needs .* train\.eval_every > 0 .*eval_every=0\)",
        ),
        ("data=image_folder data.root=/nonexistent", r"data\.root=/nonexistent has no train"),
    ],
)
def test_bad_values_raise_one_clear_sentence_before_ray(override, message):
    extra = override.split(" ")
    swaps_data = any(o.startswith("data=") for o in extra)
    overrides = [o for o in TINY if not (swaps_data and o.startswith("data"))] + extra
    cfg = compose_config(overrides)
    with pytest.raises(ConfigError, match=message) as info:
        build(cfg)
    assert "\n" not in str(info.value)


def test_short_synthetic_run_learns_well_above_chance(tmp_path: Path) -> None:
    cfg = compose_config(
        ["data=synthetic", "data.train_size=2048", "data.test_size=512", "model.width=16",
         "train.batch_size=64", "train.rounds=60", "train.eval_every=60", "train.lr=0.02",
         "logger=none"]
    )  # fmt: skip
    run(cfg, tmp_path, start_pool=in_process)
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["test_accuracy"] > 0.5  # chance is 0.1


@pytest.mark.slow
def test_build_does_not_start_ray():
    """In a fresh process (the test session shares one Ray), building a run leaves Ray off."""
    script = (
        "import ray; from gclab.app import build; from helpers.config import TINY, "
        "compose_config; build(compose_config(TINY)); assert not ray.is_initialized()"
    )
    root = Path(__file__).resolve().parents[1]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(root / "tests"), str(root)])}
    proc = subprocess.run(
        [sys.executable, "-c", script], cwd=root, env=env, capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stderr[-2000:]


def test_conf_dir_is_absolute_and_ships_config():
    assert Path(CONF_DIR).is_absolute() and (CONF_DIR / "config.yaml").is_file()


@pytest.mark.parametrize("workers", [4, 8, 16])
@pytest.mark.parametrize("scheme", options("scheme"))
def test_every_scheme_builds_with_its_defaults_at_readme_sizes(scheme, workers):
    """`python -m gclab scheme=<any> cluster.workers=<4|8|16>` must work as documented."""
    overrides = [o for o in TINY if not o.startswith("train.batch_size")]
    plan, _ = build(compose_config([*overrides, f"scheme={scheme}", f"cluster.workers={workers}",
                                    "train.batch_size=64"]))  # fmt: skip
    assert plan.scheme.n == workers
