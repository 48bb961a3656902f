"""``python -m gclab.study`` end to end on a small synthetic study, run twice.

The spec has every kind of unit: lossless real runs, replays, real stale-pipeline runs
under loss, a verification run, and a loss setting whose runs fail (a delay trace too
short for the run, which the app and the replay refuse once they know the run's length).
The first invocation records the failures and finishes the rest, the verification and
the report; the second skips what is done and resumes an interrupted run from its
checkpoint. One scheme in both pipelines keeps it to five real runs (~13 s each).
"""

from __future__ import annotations

import csv
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from omegaconf import OmegaConf

from gclab.app import run
from gclab.study.__main__ import main
from gclab.study.regime_map import cell_outcome
from gclab.study.runner import StudyRunner
from gclab.study.spec import StudySpec, load_spec, map_units, plan, run_overrides
from gclab.tracking.artifacts import read_metrics
from helpers.config import compose_config
from helpers.inprocess import in_process
from helpers.markdown import markdown_rows

SPEC = """
experiment: smoke
overrides: [cluster.workers=4, cluster.actors=2, train.rounds=12, train.eval_every=3,
            network.policy=all, data.train_size=512, data.test_size=128, train.batch_size=32]
seeds: [0]
schemes: {pipelined_cr: [scheme=pipelined_cr, scheme.s=1, scheme.T=2]}
pipelines: [stale, interleaved]
stale_lr: [constant]
losses:
  none: [delay=none]
  lossy: [delay=bernoulli, delay.p=0.3]
  broken: [delay=trace, "delay.path={trace}", delay.beyond=error]
lossless: none
verify: [{run: pipelined_cr-interleaved, loss: lossy, seed: 0}]
report: {target: 0.12, baseline: "pipelined_cr (pipeline=interleaved)"}
"""


def study(spec: Path, out: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "WANDB_MODE": "offline"}
    command = [sys.executable, "-m", "gclab.study", "--spec", str(spec), "--out", str(out)]
    return subprocess.run(command, capture_output=True, text=True, env=env, timeout=1500)


def status(out: Path) -> dict[str, tuple[str, str, str]]:
    with (out / "status.csv").open(newline="") as f:
        return {r["unit"] + ":" + r["kind"]: (r["state"], r["message"]) for r in csv.DictReader(f)}


@pytest.mark.slow
def test_study_runs_resumably_records_failures_verifies_and_reports(tmp_path: Path) -> None:
    spec, out = tmp_path / "spec.yaml", tmp_path / "study"
    np.savez(tmp_path / "short.npz", durations=np.ones((4, 3)), load=0.0)
    spec.write_text(SPEC.replace("{trace}", str(tmp_path / "short.npz")))
    proc = study(spec, out)
    assert proc.returncode == 1, proc.stderr[-3000:]  # some units failed, the rest ran
    states = status(out)
    done = {k for k, (state, _) in states.items() if state == "done"}
    assert done == {
        "pipelined_cr-interleaved/none/seed0:run", "pipelined_cr-stale-constant/none/seed0:run",
        "pipelined_cr-interleaved/lossy/seed0:replay",
        "pipelined_cr-stale-constant/lossy/seed0:run",
        "pipelined_cr-interleaved/lossy/seed0:verify",
    }  # fmt: skip
    kinds = [row["kind"] for row in csv.DictReader((out / "status.csv").open())]
    assert kinds == ["run"] * 2 + ["replay"] * 2 + ["verify"] + ["run"] * 2  # verify: replays done
    short = (
        "delay.beyond=error but trace short.npz has 4 workers × 3 rounds and the run needs 4 × 14"
    )
    for unit in ("pipelined_cr-stale-constant/broken/seed0:run",
                 "pipelined_cr-interleaved/broken/seed0:replay"):  # fmt: skip
        state, message = states[unit]
        assert state == "failed" and message.startswith(short), unit

    replayed = json.loads(
        (out / "runs/pipelined_cr-interleaved/lossy/seed0/summary.json").read_text()
    )
    assert replayed["replayed_from"] == str(out / "runs/pipelined_cr-interleaved/none/seed0")
    comparison = (out / "verify" / "comparison.md").read_text()
    row = next(line for line in comparison.splitlines() if line.startswith("| pipelined_cr"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert int(cells[1]) >= 1 and float(cells[2]) <= 1 / 128  # same accuracy per job
    rows = list(
        csv.DictReader((out / "verify" / "pipelined_cr-interleaved_lossy_seed0.csv").open())
    )
    assert len(rows) == int(cells[1])
    report = (out / "report" / "summary.md").read_text()
    baseline = "pipelined_cr (pipeline=interleaved)"
    assert "## Time to test accuracy 0.12" in report and f"ratio vs {baseline} (95 %" in report
    target = list(csv.DictReader((out / "report" / "time_to_target.csv").open()))
    assert {r["series"] for r in target} == {baseline, "pipelined_cr (pipeline=stale)"}
    assert {r["pairs"] for r in target if r["series"] == baseline} == {"1"}  # one seed
    labels = {r["label"] for r in target if r["pairs"]}  # the rows with a pair
    assert labels == {"not distinguishable"}  # one pair has no interval
    for name in ("time_to_target.csv", "curves.csv", "accuracy_vs_time.png", "total_time.png"):
        assert (out / "report" / name).is_file(), name

    # an interrupted run: no summary yet, a checkpoint from the last round
    (out / "runs/pipelined_cr-stale-constant/lossy/seed0/summary.json").unlink()
    proc = study(spec, out)
    assert proc.returncode == 1, proc.stderr[-3000:]
    states = status(out)
    assert states["pipelined_cr-stale-constant/lossy/seed0:run"] == ("done", "resumed")
    assert states["pipelined_cr-interleaved/none/seed0:run"] == ("done", "finished earlier")
    assert states["pipelined_cr-interleaved/lossy/seed0:verify"] == ("done", "finished earlier")
    console = (out / "runs/pipelined_cr-stale-constant/lossy/seed0/console.log").read_text()
    assert console.count("-m gclab experiment=") == 2  # the first run, then its resumption
    assert "resume=true" in console


FINISHED_ONLY = """
experiment: smoke
overrides: [cluster.workers=4, train.rounds=6, train.eval_every=3, network.policy=all,
            data.train_size=256, data.test_size=64, train.batch_size=32, model.width=8]
seeds: [0]
schemes: {uncoded: [scheme=uncoded], classic_cr: [scheme=classic_cr, scheme.s=1]}
losses: {none: [delay=none], lossy: [delay=bernoulli, delay.p=0.3]}
lossless: none
report: {partition_compute: 0.01}
"""
VERIFY_UNCODED = "verify: [{run: uncoded, loss: lossy, seed: 0}]\n"


def train_in_process(spec: StudySpec, overrides: list[str], run_dir: Path) -> None:
    """Train a study unit in process into ``run_dir``, with the files Hydra would write."""
    cfg = compose_config(run_overrides(spec, overrides))
    (run_dir / ".hydra").mkdir(parents=True)
    OmegaConf.save(cfg, run_dir / ".hydra" / "config.yaml")
    OmegaConf.save(
        OmegaConf.create(run_overrides(spec, overrides)), run_dir / ".hydra" / "overrides.yaml"
    )
    run(cfg, run_dir, start_pool=in_process)


def test_report_only_replays_the_finished_runs_and_trains_nothing(tmp_path):
    """The uncoded source and the verification run of its lossy replay have finished
    (trained here, in process), classic_cr's source has not. The archive then carries the
    finished runs to a second study folder, which reports the same numbers without
    training."""
    (tmp_path / "spec.yaml").write_text(FINISHED_ONLY + VERIFY_UNCODED)
    spec = load_spec(tmp_path / "spec.yaml")
    units, (check,) = plan(spec)
    source = next(u for u in units if u.name == "uncoded/none/seed0")
    source_dir = tmp_path / "out" / "runs" / source.name
    train_in_process(spec, source.overrides, source_dir)
    train_in_process(spec, check.overrides, tmp_path / "out" / "verify" / "runs" / check.name)

    archive = ["--archive", str(tmp_path / "archive")]
    argv = ["--spec", str(tmp_path / "spec.yaml"), "--out", str(tmp_path / "out")]
    assert main([*argv, "--report-only", *archive]) == 0
    states = status(tmp_path / "out")
    assert states == {"uncoded/lossy/seed0:replay": ("done", "")}  # classic_cr: no source yet
    replayed = json.loads((tmp_path / "out/runs/uncoded/lossy/seed0/summary.json").read_text())
    assert replayed["replayed_from"] == str(source_dir)
    assert sorted(p.name for p in (tmp_path / "out" / "runs").iterdir()) == ["uncoded"]
    report = (tmp_path / "out" / "report" / "summary.md").read_text()
    assert "| uncoded/lossy/seed0 |" in report  # the replay is reported
    normalised = tmp_path / "out" / "normalised"
    for unit in ("uncoded/none/seed0", "uncoded/lossy/seed0"):  # 1 partition per worker-round
        compute = [c for r in read_metrics(normalised / "runs" / unit / "metrics.jsonl")
                   if r["kind"] == "round" for c in r["compute_s"]]  # fmt: skip
        assert np.median(compute) == pytest.approx(0.01)
    assert "| uncoded/lossy/seed0 |" in (normalised / "report" / "summary.md").read_text()
    for clock in (tmp_path / "out", normalised):  # the replay against the real lossy run
        (row,) = [r for r in markdown_rows(clock / "verify" / "comparison.md") if "point" in r]
        assert row["point"] == "uncoded/lossy/seed0" and int(row["jobs compared"]) == 2
        assert float(row["max accuracy gap"]) == 0  # uncoded sums the same partials
        assert (clock / "verify" / "uncoded_lossy_seed0.csv").is_file()
    real = [c for r in read_metrics(normalised / "verify/runs/uncoded/lossy/seed0/metrics.jsonl")
            if r["kind"] == "round" for c in r["compute_s"]]  # fmt: skip
    assert np.median(real) == pytest.approx(0.01)  # re-timed like the study's runs
    rows = list(csv.DictReader((normalised / "verify" / "uncoded_lossy_seed0.csv").open()))
    for column, run_dir in (("real_time", "verify/runs"), ("replay_time", "runs")):
        evals = read_metrics(normalised / run_dir / "uncoded/lossy/seed0/metrics.jsonl")
        times = [r["virtual_time"] for r in evals if r["kind"] == "eval"]
        assert [float(row[column]) for row in rows] == pytest.approx(times), column
    archived = sorted(
        p.relative_to(tmp_path / "archive") for p in (tmp_path / "archive").rglob("*.*")
    )
    assert archived == [  # real runs only, finished
        Path("runs/uncoded/none/seed0.tar.xz"),
        Path("verify/uncoded/lossy/seed0.tar.xz"),
    ]

    argv[-1] = str(tmp_path / "elsewhere")
    assert main([*argv, "--report-only", *archive]) == 0
    restored = tmp_path / "elsewhere" / "runs" / source.name
    for name in ("metrics.jsonl", "summary.json", ".hydra/config.yaml"):
        assert (restored / name).read_bytes() == (source_dir / name).read_bytes(), name
    for name in ("report/summary.csv", "runs/uncoded/lossy/seed0/metrics.jsonl"):
        here, there = tmp_path / "out" / name, tmp_path / "elsewhere" / name
        moved = here.read_text().replace(str(tmp_path / "out"), str(tmp_path / "elsewhere"))
        assert moved == there.read_text(), name  # the same numbers, from the other folder


def test_runs_are_archived_as_they_finish_and_not_trained_again_elsewhere(tmp_path, capsys):
    """StudyRunner.train with a stand-in for ``python -m gclab`` that writes a finished run
    for uncoded and fails classic_cr."""
    (tmp_path / "spec.yaml").write_text(FINISHED_ONLY)
    spec = load_spec(tmp_path / "spec.yaml")
    units, checks = plan(spec)
    real = [u for u in units if not u.replay]
    assert [u.name for u in real] == ["uncoded/none/seed0", "classic_cr/none/seed0"]
    launched: list[str] = []

    def launch(unit, run_dir, resume):
        launched.append(unit.name)
        (run_dir / ".hydra").mkdir(parents=True)
        for name in ("metrics.jsonl", ".hydra/config.yaml"):
            (run_dir / name).write_text(f"{unit.name}\n")
        if unit.name.startswith("uncoded"):
            (run_dir / "summary.json").write_text("{}\n")
        return 0

    first = StudyRunner(spec, tmp_path / "out", archive=tmp_path / "archive")
    first._launch = launch
    assert [first.train(u).state for u in real] == ["done", "failed"]
    assert (tmp_path / "archive/runs/uncoded/none/seed0.tar.xz").is_file()
    assert not (tmp_path / "archive/runs/classic_cr").exists()

    argv = ["--spec", str(tmp_path / "spec.yaml"), "--out", str(tmp_path / "elsewhere")]
    assert main([*argv, "--archive", str(tmp_path / "archive"), "--dry-run"]) == 0
    listing = capsys.readouterr().out
    assert "uncoded/none/seed0: python -m gclab experiment=smoke" in listing
    assert "delay=none seed=0  [archived]\nclassic_cr/none/seed0:" in listing
    assert f"not to train: 0 finished in {argv[-1]}, 1 to restore from" in listing
    assert not (tmp_path / "elsewhere").exists()

    second = StudyRunner(spec, tmp_path / "elsewhere", archive=tmp_path / "archive")
    second._launch = launch
    second.sync_archive(units, checks)
    assert "restored run uncoded/none/seed0 from" in capsys.readouterr().out
    uncoded, classic_cr = (second.train(u) for u in real)
    assert (uncoded.state, uncoded.message) == ("done", "finished earlier")
    assert classic_cr.state == "failed"
    assert launched == [u.name for u in real] + ["classic_cr/none/seed0"]
    restored = tmp_path / "elsewhere" / "runs" / "uncoded" / "none" / "seed0"
    assert (restored / "metrics.jsonl").read_text() == "uncoded/none/seed0\n"


def test_only_runs_the_units_named_like_a_pattern(tmp_path, capsys, monkeypatch):
    """``--only`` picks units by name (here classic_cr's, whose stand-in run fails, so its
    replay is skipped); a pattern that names no unit is refused before anything runs."""
    (tmp_path / "spec.yaml").write_text(FINISHED_ONLY)
    argv = ["--spec", str(tmp_path / "spec.yaml"), "--out", str(tmp_path / "out")]
    assert main([*argv, "--only", "classic_cr/*", "--dry-run"]) == 0
    listing = capsys.readouterr().out.splitlines()
    assert [line.split(":")[0] for line in listing[:2]] == [
        "classic_cr/none/seed0", "classic_cr/lossy/seed0",
    ]  # fmt: skip
    assert listing[2:] == ["1 real runs, 1 replays, 0 verification runs, 0 map corners"]
    launched: list[str] = []

    def launch(self, unit, run_dir, resume):
        launched.append(unit.name)
        return 1

    monkeypatch.setattr(StudyRunner, "_launch", launch)
    assert main([*argv, "--only", "classic_cr/*"]) == 1  # its run failed
    assert launched == ["classic_cr/none/seed0"]
    assert status(tmp_path / "out") == {
        "classic_cr/none/seed0:run": ("failed", "python -m gclab exited with code 1"),
        "classic_cr/lossy/seed0:replay": ("skipped", "classic_cr/none/seed0 has not finished"),
    }
    assert main([*argv, "--only", "classic_cr/*", "--only", "unccoded/*"]) == 2
    assert "--only 'unccoded/*' matches no unit of the study" in capsys.readouterr().err
    assert launched == ["classic_cr/none/seed0"]


MAPPED = """
experiment: smoke
overrides: [cluster.workers=4, train.rounds=8, train.eval_every=2, network.policy=all,
            network.rto=0.5, data.train_size=256, data.test_size=64, train.batch_size=32,
            model.width=8]
seeds: [0, 1]
regime: {partition_seconds: 0.01, compute_per_rto: 0.04, bytes_per_compute: 0.0}
schemes: {classic_fr: [scheme=classic_fr, scheme.s=1], uncoded: [scheme=uncoded]}
losses: {none: [delay=none]}
lossless: none
report: {target: 0.05, baseline: classic_fr, partition_compute: regime, normalise: all}
map:
  rhos: [0.1, 1.0]
  losses: {light: [delay=bernoulli, delay.p=0.05], heavy: [delay=bernoulli, delay.p=0.4]}
  baselines: {classic_fr: [uncoded]}
  verify: [{run: classic_fr, rho: 1.0, loss: heavy, seeds: [0]}]
"""


@pytest.mark.slow  # five trainings and a report: end to end
def test_the_regime_map_is_built_from_the_lossless_runs_and_checked_by_its_corner(tmp_path):
    """Two exact arms' lossless runs (trained here, in process) and one real corner: the map
    holds every (ρ, loss) cell of uncoded against classic_fr, each ratio the paired one of
    the cells' replays at rto = k·c0/ρ, and the corner's real run stands beside its cell."""
    (tmp_path / "spec.yaml").write_text(MAPPED)
    spec = load_spec(tmp_path / "spec.yaml")
    units, _ = plan(spec)
    out = tmp_path / "out"
    for unit in units:
        train_in_process(spec, unit.overrides, out / "runs" / unit.name)
    (corner,) = map_units(spec)
    train_in_process(spec, corner.overrides, out / "map" / "runs" / corner.name)
    argv = ["--spec", str(tmp_path / "spec.yaml"), "--out", str(out), "--report-only"]
    assert main(argv) == 0

    rows = list(csv.DictReader((out / "map" / "regime_map.csv").open()))
    assert [(r["variant"], r["rho"], r["loss"], r["pairs"]) for r in rows] == [
        ("uncoded", rho, loss, "2") for loss in ("light", "heavy") for rho in ("0.1", "1.0")
    ]
    c0, partitions = 0.01, 2  # classic_fr s = 1 on 4 workers: 2 partitions per worker-round
    for row in rows:
        rto = partitions * c0 / float(row["rho"])
        delay = compose_config(run_overrides(spec, spec.map.losses[row["loss"]])).delay
        times = {
            name: [cell_outcome(out / "runs" / name / "none" / f"seed{s}", 0.05, rto, c0, delay)
                   for s in (0, 1)]
            for name in ("classic_fr", "uncoded")
        }  # fmt: skip
        horizon = float(row["horizon"])
        logs = [
            math.log(b.restricted(horizon) / a.restricted(horizon))
            for a, b in zip(times["uncoded"], times["classic_fr"])
        ]
        assert float(row["ratio"]) == pytest.approx(math.exp(np.mean(logs)), rel=1e-9)
    table = (out / "map" / "regime_map.md").read_text()
    assert "uncoded" in table and (out / "map" / "regime_map.png").stat().st_size > 0
    (check,) = [r for r in markdown_rows(out / "map" / "verify.md") if "classic_fr" in str(r)]
    assert "1" in check.values()  # ρ = 1 and one seed
