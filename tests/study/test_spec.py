"""A study spec and the units it implies (no run is started)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from gclab.errors import ConfigError
from gclab.study.spec import PACKET_LOSS, check_regime, load_spec, map_units, plan, rto_of


def test_the_packet_loss_study_runs_stale_pipelines_for_real_and_replays_the_rest():
    spec = load_spec()
    units, checks = plan(spec)
    real = [u for u in units if not u.replay]
    replays = [u for u in units if u.replay]
    # per seed: 9 lossless runs (uncoded, 2 classic, 2 x interleaved, 2 x stale-constant
    # [shared by stale-scaled]) and 2 x 2 stale rules x 4 loss settings
    assert (len(real), len(replays), len(checks)) == (3 * (7 + 16), 3 * 5 * 4, 2)
    assert not any(u.name.startswith("pipelined_cr-stale-scaled/none/") for u in units)
    assert {u.name.split("/")[0] for u in replays} == {
        "uncoded", "classic_cr", "classic_fr", "pipelined_cr-interleaved",
        "pipelined_fr-interleaved",
    }  # fmt: skip
    for unit in replays:
        variant, _, seed = unit.name.split("/")
        assert unit.source == f"{variant}/none/{seed}"
    kinds = ["lossless" if "/none/" in u.name else "replay" if u.replay else "lossy" for u in units]
    assert kinds == sorted(kinds, key=["lossless", "replay", "lossy"].index)
    points = [u.name.rsplit("/", 1)[0] for u in units]
    assert points[:6] == ["uncoded/none"] * 3 + ["classic_cr/none"] * 3  # every seed of a point
    assert [u.name.rsplit("/", 1)[1] for u in units[:6]] == ["seed0", "seed1", "seed2"] * 2
    losses = [u.name.split("/")[1] for u, kind in zip(units, kinds) if kind == "lossy"]
    assert losses == sorted(losses, key=list(spec.losses).index)  # loss setting by loss setting
    stale = next(u for u in units if u.name == "pipelined_fr-stale-scaled/bernoulli-0.1/seed1")
    assert stale.overrides == (
        "scheme=pipelined_fr", "scheme.s=1", "scheme.T=2", "train.pipeline=stale",
        "train.stale_lr=scaled", "delay=bernoulli", "delay.p=0.1", "seed=1",
    )  # fmt: skip
    assert [c.name for c in checks] == [
        "classic_cr/bernoulli-0.1/seed0",
        "pipelined_fr-interleaved/gilbert_elliott-0.1-burst3/seed0",
    ]


def test_the_study_experiment_is_the_brief(tmp_path):
    from helpers.config import compose_config

    cfg = compose_config(["experiment=packet_loss_study"])
    assert cfg.data._target_.endswith("ImageFolderData") and cfg.cluster.workers == 8
    assert (cfg.network.policy, cfg.network.rto) == ("all", 0.5)
    assert (cfg.train.epochs, cfg.train.target_accuracy, cfg.train.stop_at_target) == (3, 0.6, True)
    spec = OmegaConf.load(PACKET_LOSS)
    assert spec.seeds == [0, 1, 2] and spec.report.target == cfg.train.target_accuracy


SMALL = """
experiment: smoke
seeds: [0]
schemes: {uncoded: [scheme=uncoded], pipelined_cr: [scheme=pipelined_cr]}
pipelines: [stale, interleaved]
losses: {none: [delay=none], lossy: [delay=bernoulli, delay.p=0.1]}
lossless: none
"""


@pytest.mark.parametrize(
    ("sets", "message"),
    [
        (["seedz=[1]"], r"Key 'seedz' not in 'StudySpec'"),
        (["lossless=nothing"], r"lossless='nothing' is not one of the losses"),
        (["report.band=iqr"], r"report\.band='iqr' is invalid"),
        (["report.partition_compute=0"], r"partition_compute=0 is invalid: it must"),
        (["report.partition_compute=regime"], r"'regime' needs a regime section"),
        (["report.normalise=rto"], r"report\.normalise='rto' is invalid"),
        (["order=random"], r"order='random' is invalid: it must be 'points' or 'seeds'"),
        (["aa=[uncoded,pipelined_cr]"], r"is no A/A pair: its arms' overrides differ"),
        (["aa=[uncoded]"], r"aa=\['uncoded'\] is invalid: it names two scheme labels"),
        (["lossy_only=[nope]"], r"lossy_only=\['nope'\] names no scheme of"),
        (["report.horizon=-1"], r"report\.horizon=-1\.0 is invalid: it must be a positive"),
        (["report.aa=[uncoded]", "report.target=0.5"], r"report\.aa=\['uncoded'\] is invalid"),
        (["report.aa=[uncoded,x]"], r"it names two groups \(an A/A pair\) and needs a report"),
        (["lossless_only=[uncoded,classic]"], r"lossless_only=\['classic'\] names no scheme of"),
        (["report.smooth=0"], r"report\.smooth=0 is invalid: it must be a number of"),
        (["report.aa_at=:0.1"], r"report\.aa_at=':0\.1' is invalid: it must be a loss setting"),
        (["losses.x=[delay=bernoulli,delay.p=2]"], r"delay\.p=2.* must be a probability"),
        (["losses.x=[delay.pp=2]"], r"does not compose: Could not override 'delay\.pp'"),
        (["verify=[{run: pipelined_cr-stale-constant, loss: lossy}]"],
         r"not a replayed run of the study; verify one of: uncoded/lossy/seed0, pipelined_cr-int"),
        (["verify=[{run: uncoded, loss: lossy, seed: 7}]"], r"seed the study does not run\.$"),
    ],
)  # fmt: skip
def test_a_bad_spec_fails_in_one_sentence_before_any_run(tmp_path, sets, message):
    (tmp_path / "small.yaml").write_text(SMALL)
    with pytest.raises(ConfigError, match=message) as info:
        plan(load_spec(tmp_path / "small.yaml", sets))
    assert "\n" not in str(info.value)


def test_a_lossless_only_scheme_runs_without_loss_alone(tmp_path):
    (tmp_path / "small.yaml").write_text(SMALL)
    units, _ = plan(load_spec(tmp_path / "small.yaml", ["lossless_only=[pipelined_cr]"]))
    assert [u.name for u in units] == [
        "uncoded/none/seed0",
        "pipelined_cr-stale-constant/none/seed0",
        "pipelined_cr-interleaved/none/seed0",
        "uncoded/lossy/seed0",
    ]
    assert units[-1].source == "uncoded/none/seed0"


@pytest.mark.slow
@pytest.mark.no_ray
def test_the_cli_lists_the_units_and_refuses_a_bad_spec(tmp_path: Path):
    command = [sys.executable, "-m", "gclab.study", "--set", "seeds=[0]", "--dry-run"]
    proc = subprocess.run(command, capture_output=True, text=True, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "23 real runs, 20 replays, 2 verification runs" in proc.stdout
    assert (
        "uncoded/none/seed0: python -m gclab experiment=packet_loss_study network.server_time=0 "
        "scheme=uncoded delay=none seed=0"
    ) in proc.stdout
    assert not (tmp_path / "studies").exists()  # a dry run writes nothing
    proc = subprocess.run([*command, "--set", "lossless=x"], capture_output=True, text=True)
    assert proc.returncode == 2 and proc.stderr.startswith("gclab.study: error: study spec")
    assert "Traceback" not in proc.stderr


AA = """
experiment: smoke
seeds: [0, 1]
schemes:
  uncoded: [scheme=uncoded]
  uncoded_aa: [scheme=uncoded]
  sgc: [scheme=sr_sgc, scheme.B=1, scheme.W=2, scheme.lam=1, train.pipeline=stale,
        train.stale_lr=scaled, train.lr=0.1]
  sgc_x2: [scheme=sr_sgc, scheme.B=1, scheme.W=2, scheme.lam=1, train.pipeline=interleaved,
           train.models=2]
aa: [uncoded, uncoded_aa]
lossy_only: [sgc_x2]
losses: {none: [delay=none], lossy: [delay=bernoulli, delay.p=0.1]}
lossless: none
shortcut: false
order: seeds
"""


def test_the_a_a_arm_runs_the_same_overrides_on_its_own_loss_stream_seed_by_seed(tmp_path):
    """The A/A arm's runs differ from its twin's in network.stream alone; a scheme whose
    overrides name its pipeline is one variant as given; lossy_only keeps it out of the
    lossless setting; order=seeds runs every real run of a seed before the next seed."""
    (tmp_path / "aa.yaml").write_text(AA)
    units, _ = plan(load_spec(tmp_path / "aa.yaml"))
    by_name = {u.name: u for u in units}
    twin, aa = by_name["uncoded/lossy/seed1"], by_name["uncoded_aa/lossy/seed1"]
    assert [k for k in aa.overrides if k not in twin.overrides] == ["network.stream=1"]
    assert by_name["sgc/lossy/seed0"].overrides[-4:] == (
        "train.lr=0.1", "delay=bernoulli", "delay.p=0.1", "seed=0",
    )  # fmt: skip
    assert "sgc_x2/none/seed0" not in by_name and "sgc_x2/lossy/seed0" in by_name
    seeds = [u.name.rsplit("seed", 1)[1] for u in units]
    assert seeds == sorted(seeds) and len(units) == 2 * (3 + 4)


REGIME = """
experiment: packet_loss_v3
schemes: {classic_fr: [scheme=classic_fr, scheme.s=1]}
losses: {none: [delay=none]}
lossless: none
report: {baseline: classic_fr, target: 0.6}
regime: {partition_seconds: 0.013, compute_per_rto: 0.3, bytes_per_compute: 0.25}
map:
  rhos: [0.1, 3.0]
  losses: {b: [delay=bernoulli, delay.p=0.2]}
  baselines: {classic_fr: []}
  verify: [{run: classic_fr, rho: 0.1, loss: b, seeds: [0, 1]}]
"""


def test_the_regime_is_checked_against_the_config_and_sets_the_corners_rto(tmp_path):
    """The spec's regime is what the experiment realises (the baseline's round of 2
    partitions of 0.013 s over the rto 0.0867 s); a regime the config does not realise
    fails in one sentence; a map corner runs at the rto of its compute per rto, with a
    budget stretched as far as the rto is."""
    (tmp_path / "r.yaml").write_text(REGIME)
    spec = load_spec(tmp_path / "r.yaml")
    realised = check_regime(spec)
    assert realised["partitions"] == 2
    assert realised["compute_per_rto"] == pytest.approx(0.026 / 0.0867)
    assert rto_of(spec, 0.3) == pytest.approx(0.0866667, rel=1e-5)
    corners = map_units(spec)
    assert [u.name for u in corners] == ["classic_fr/rho0.1/b/seed0", "classic_fr/rho0.1/b/seed1"]
    assert "network.rto=0.26" in corners[0].overrides
    assert "train.time_budget=375" in corners[0].overrides  # 125 s stretched 3x
    with pytest.raises(ConfigError, match=r"regime\.compute_per_rto=0\.5 is not what the runs"):
        load_spec(tmp_path / "r.yaml", ["regime.compute_per_rto=0.5"])
    with pytest.raises(ConfigError, match=r"map\.verify point classic_fr/rho0\.2/b is not a cell"):
        load_spec(tmp_path / "r.yaml", ["map.verify=[{run: classic_fr, rho: 0.2, loss: b}]"])
