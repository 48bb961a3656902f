"""``python -m gclab.report``: real sweeps through both CLIs, and hand-made job folders.

The end-to-end tests run small Hydra sweeps as a user would (subprocesses) and check that
every number in ``summary.csv`` and ``summary.md`` is the run's own ``summary.json``
value, that failed jobs are listed, and that the plots are real PNGs. The unit tests
build job folders by hand for what real sweeps rarely produce: runs without
evaluations, null/NaN values, torn metrics files, unknown delay models.
"""

from __future__ import annotations

import csv
import json
import math
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml
from hydra import compose, initialize_config_dir
from matplotlib.image import imread

import gclab.sim.config  # noqa: F401  (registers the simulator's schema, to compose sim.yaml)
from gclab import CONF_DIR
from gclab.report import SweepError, load_sweep, plots, write_report
from gclab.report.__main__ import main as report_main
from gclab.report.compare import holm, paired_p
from gclab.report.groups import groups
from gclab.report.runs import config_loss_rate, staleness
from helpers.config import compose_config
from helpers.markdown import markdown_rows

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
REPO = CONF_DIR.parents[1]


def cli(module: str, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "WANDB_MODE": "offline", "WANDB_SILENT": "true"}
    return subprocess.run(
        [sys.executable, "-m", module, *args],
        capture_output=True, text=True, timeout=240, cwd=cwd, env=env,
    )  # fmt: skip


def report(capsys: pytest.CaptureFixture[str], *args: str) -> subprocess.CompletedProcess[str]:
    """``python -m gclab.report ARGS`` in this process (the module's own ``main``): its exit
    code and output. An exception it lets through fails the test with its traceback; the
    slow tests above run the real command."""
    capsys.readouterr()  # only what the report prints
    try:
        report_main(list(args))
        code = 0
    except SystemExit as exc:
        code = 0 if exc.code is None else exc.code
    out, err = capsys.readouterr()
    return subprocess.CompletedProcess(["gclab.report", *args], code, out, err)


def read_csv(path: Path) -> list[dict[str, str]]:
    with path.open(newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def summary_of(sweep: Path, job: str) -> dict[str, Any]:
    return json.loads((sweep / job / "summary.json").read_text())


def assert_png(path: Path) -> None:
    data = path.read_bytes()
    assert data[:8] == PNG_MAGIC and len(data) > 10_000, path
    height, width, _ = imread(path).shape
    assert height > 300 and width > 400


def assert_csv_matches(sweep: Path, rows: list[dict[str, str]], keys: tuple[str, ...]) -> None:
    for row in rows:
        if row["status"] != "ok":
            continue
        summary = summary_of(sweep, row["job"])
        for key in keys:
            value = summary[key]
            assert (row[key] == "") if value is None else (float(row[key]) == value), (row, key)


# --- real sweeps through the command line ------------------------------------------------


@pytest.mark.slow
def test_simulator_sweep_report_matches_the_runs(tmp_path: Path) -> None:
    sweep = tmp_path / "sweep"
    proc = cli(
        "gclab.sim", "-m", "scheme=uncoded,classic_cr", "delay=bernoulli", "delay.p=0,0.1",
        "network.policy=all", "cluster.workers=8", "sim.jobs=50", f"hydra.sweep.dir={sweep}",
        cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    proc = cli("gclab.report", str(sweep), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "4 runs (0 failed)" in proc.stdout

    rows = read_csv(sweep / "summary.csv")
    assert [r["job"] for r in rows] == ["0", "1", "2", "3"]
    assert [r["kind"] for r in rows] == ["sim"] * 4
    assert [float(r["loss_rate"]) for r in rows] == [0.0, 0.1, 0.0, 0.1]
    assert_csv_matches(sweep, rows, ("total_time", "waits", "retransmissions", "load", "jobs"))

    table = markdown_rows(sweep / "summary.md")
    assert [r["overrides"] for r in table] == [
        "scheme=uncoded delay.p=0", "scheme=uncoded delay.p=0.1",
        "scheme=classic_cr delay.p=0", "scheme=classic_cr delay.p=0.1",
    ]  # fmt: skip
    for row in table:
        summary = summary_of(sweep, row["job"])
        assert row["total time (s)"] == f"{summary['total_time']:.2f}"
        assert row["waits"] == str(summary["waits"])
        assert row["retransmissions"] == str(summary["retransmissions"])
        assert row["load"] == f"{summary['load']:.6f}" and row["status"] == "ok"
    assert summary_of(sweep, "1")["total_time"] > 0  # loss costs time: the plot is not flat
    assert_png(sweep / "total_time.png")
    assert not (sweep / "accuracy_vs_time.png").exists()  # no training, no accuracy


@pytest.mark.slow
def test_simulator_sweep_with_an_invalid_job_still_reports_the_others(tmp_path: Path) -> None:
    sweep = tmp_path / "sweep"
    proc = cli(
        "gclab.sim", "-m", "scheme=classic_fr", "delay=bernoulli", "delay.p=0.1,1.5,0.2",
        "cluster.workers=8", "sim.jobs=20", f"hydra.sweep.dir={sweep}", cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]  # the sweep goes on past the bad job
    assert "delay.p=1.5 is invalid" in (sweep / "1" / "error.txt").read_text()
    assert not (sweep / "1" / "summary.json").exists()  # delay.p=1.5 is rejected
    assert (sweep / "0" / "summary.json").is_file() and (sweep / "2" / "summary.json").is_file()
    out = tmp_path / "report"
    proc = cli("gclab.report", str(sweep), "--out", str(out))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "3 runs (1 failed)" in proc.stdout
    rows = read_csv(out / "summary.csv")
    assert [r["status"] for r in rows] == ["ok", "failed", "ok"]
    assert rows[1]["total_time"] == ""
    assert_csv_matches(sweep, rows, ("total_time", "waits", "retransmissions"))
    table = markdown_rows(out / "summary.md")
    assert [r["status"][:6] for r in table] == ["ok", "failed", "ok"]
    assert "delay.p=1.5 is invalid" in table[1]["status"]  # from the job's error.txt
    assert table[1]["total time (s)"] == "–"
    assert_png(out / "total_time.png")
    assert not (sweep / "summary.csv").exists()  # --out leaves the sweep folder alone


@pytest.mark.slow
def test_training_sweep_report_matches_summaries_and_metrics(tmp_path: Path) -> None:
    sweep = tmp_path / "sweep"
    proc = cli(
        "gclab", "-m", "experiment=smoke", "scheme=classic_fr", "delay=bernoulli",
        "delay.p=0,0.1,1.5", "cluster.workers=2", f"hydra.sweep.dir={sweep}", cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    proc = cli("gclab.report", str(sweep))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "3 runs (1 failed)" in proc.stdout

    rows = read_csv(sweep / "summary.csv")
    assert [r["status"] for r in rows] == ["ok", "ok", "failed"]
    assert all(r["kind"] == "train" for r in rows)
    keys = ("test_accuracy", "total_virtual_time", "decode_ms_mean", "decode_ms_p95", "waits")
    assert_csv_matches(sweep, rows, (*keys, "retransmissions"))
    for row in rows[:2]:
        records = [json.loads(line) for line in (sweep / row["job"] / "metrics.jsonl").open()]
        evals = [r for r in records if r["kind"] == "eval"]
        assert float(row["test_accuracy"]) == evals[-1]["test_accuracy"]
        assert float(row["total_virtual_time"]) == pytest.approx(records[-1]["virtual_time"])

    table = markdown_rows(sweep / "summary.md")
    for row in table:
        if row["status"] != "ok":
            assert "delay.p=1.5 is invalid" in row["status"]  # the job's error.txt
            continue
        summary = summary_of(sweep, row["job"])
        assert row["final accuracy"] == f"{summary['test_accuracy']:.4f}"
        assert row["total virtual time (s)"] == f"{summary['total_virtual_time']:.2f}"
        assert row["decode ms p95"] == f"{summary['decode_ms_p95']:.2f}"
        assert row["waits"] == str(summary["waits"])
    for name in ("accuracy_vs_time.png", "total_time.png", "decode_latency.png"):
        assert_png(sweep / name)


def test_report_refuses_what_holds_no_run(tmp_path: Path, capsys) -> None:
    proc = report(capsys, str(tmp_path / "missing"))
    assert proc.returncode == 2
    assert proc.stderr.startswith("gclab.report: error:") and "not a directory" in proc.stderr
    with pytest.raises(SweepError, match="not a Hydra sweep folder"):
        load_sweep(tmp_path)
    job(tmp_path / "a" / "0", [])
    for args, message in [
        ([str(tmp_path / "a"), str(tmp_path / "a")], "several folders given; say where to write"),
        ([str(tmp_path / "a"), "--target", "0.6", "--baseline", "x", "--target", "1.5"], "1.5"),
        ([str(tmp_path / "a"), "--baseline", "uncoded"], "--baseline concerns times to target"),
        ([str(tmp_path / "a"), "--horizon", "9"], "--horizon concerns times to target"),
        ([str(tmp_path / "a"), "--aa", "x", "y"], "--aa concerns times to target"),
        ([str(tmp_path / "a"), "--target", "0.6", "--horizon", "0"], "'0' is not a number of"),
        ([str(tmp_path / "a"), "--target", "0.6", "--aa-at", "none"], "--aa-at places an A/A"),
        ([str(tmp_path / "a"), "--smooth", "3"], "--smooth concerns times to target"),
        ([str(tmp_path / "a"), "--target", "0.6", "--smooth", "0"], "'0' is not a number of"),
        ([str(tmp_path / "a"), "--target", "0.6", "--aa", "x", "y", "--aa-at", "b:x"],
         "'b:x' is not a loss setting"),
        ([str(tmp_path / "a"), "--target", "0.6", "--baseline", "uncoded"],
         "--baseline 'uncoded' is none of the runs' series"),
    ]:  # fmt: skip
        proc = report(capsys, *args)
        assert proc.returncode == 2 and message in proc.stderr, proc.stderr


def test_help_names_every_option_and_the_bands(capsys) -> None:
    with pytest.raises(SystemExit) as exit_:
        report_main(["--help"])
    assert exit_.value.code == 0
    text = " ".join(capsys.readouterr().out.split())
    for option in ("--out", "--target ACC", "--band {ci,range}", "--baseline SERIES",
                   "--horizon S", "--smooth K", "--aa GROUP_A GROUP_B",
                   "--aa-at SETTING"):  # fmt: skip
        assert option in text, option
    assert "ci = 95 % t-interval of the mean over seeds, range = min–max over seeds" in text


def test_single_runs_and_folders_of_sweeps_are_read_too(tmp_path: Path) -> None:
    for name in ("a", "b"):
        for num in (1, 0):
            job(tmp_path / "day" / name / str(num), [f"scheme.s={num}"], num=num)
        (tmp_path / "day" / name / "multirun.yaml").write_text("{}")
    assert [r.job for r in load_sweep(tmp_path / "day").runs] == ["a/0", "a/1", "b/0", "b/1"]
    assert [r.job for r in load_sweep(tmp_path / "day" / "a" / "1").runs] == ["1"]
    sweep = load_sweep(tmp_path / "day" / "b", tmp_path / "day" / "a" / "1")
    assert sweep.path == (tmp_path / "day").resolve()
    assert [r.job for r in sweep.runs] == ["b/0", "b/1", "a/1"]  # in the order given


# --- hand-made job folders ---------------------------------------------------------------


def job(
    path: Path,
    overrides: list[str],
    *,
    name: str = "gclab",
    num: int = 0,
    choices: dict[str, str] | None = None,
    config: dict[str, Any] | None = None,
    summary: dict[str, Any] | None = None,
    metrics: str | None = None,
    error: str | None = None,
) -> Path:
    """A job directory laid out as Hydra and the apps write it."""
    hydra = path / ".hydra"
    hydra.mkdir(parents=True)
    (hydra / "overrides.yaml").write_text(yaml.safe_dump(overrides))
    (hydra / "config.yaml").write_text(yaml.safe_dump(config or {}))
    meta = {"job": {"name": name, "num": num}, "runtime": {"choices": choices or {}}}
    (hydra / "hydra.yaml").write_text(yaml.safe_dump({"hydra": meta}))
    if summary is not None:
        (path / "summary.json").write_text(json.dumps(summary))
    if metrics is not None:
        (path / "metrics.jsonl").write_text(metrics)
    if error is not None:
        (path / "error.txt").write_text(error)
    return path


BERNOULLI = "gclab.network.bernoulli.Bernoulli"


def training_job(sweep: Path, num: int, scheme: str, p: float, **kwargs: Any) -> Path:
    return job(
        sweep / str(num), [f"scheme={scheme}", f"delay.p={p}"], num=num,
        choices={"scheme": scheme, "delay": "bernoulli"},
        config={"delay": {"_target_": BERNOULLI, "p": p}}, **kwargs,
    )  # fmt: skip


def records(*items: dict[str, Any]) -> str:
    return "".join(json.dumps(item) + "\n" for item in items)


def test_runs_without_evaluations_and_with_null_values(tmp_path: Path) -> None:
    rounds = records(
        {"kind": "round", "round": 0, "jobs_decoded": 1, "virtual_time": 0.5, "decode_ms": 2.0},
        {"kind": "round", "round": 1, "jobs_decoded": 0, "virtual_time": 1.0, "decode_ms": 0.0},
        {"kind": "round", "round": 2, "jobs_decoded": 1, "virtual_time": 1.5, "decode_ms": None},
    )
    nulls = {"scheme": "uncoded", "test_accuracy": None, "target_accuracy": 0.5,
             "time_to_target": None, "total_virtual_time": 1.5, "decode_ms_mean": None,
             "decode_ms_p95": float("nan"), "waits": 0, "retransmissions": 2}  # fmt: skip
    training_job(tmp_path, 0, "uncoded", 0.0, summary=nulls, metrics=rounds)
    training_job(
        tmp_path,
        1,
        "uncoded",
        0.1,
        summary={**nulls, "total_virtual_time": 3.0},
        metrics=rounds + '{"kind": "eval", "round": 2, "virtu',
    )  # torn last line
    sweep = load_sweep(tmp_path)
    assert [len(run.records) for run in sweep.runs] == [3, 3]
    assert sweep.runs[0].decode_ms().tolist() == [2.0]  # no job decoded, or null: left out
    written = {p.name for p in write_report(sweep, tmp_path)}
    assert written == {"summary.csv", "summary.md", "total_time.png", "decode_latency.png"}
    row = markdown_rows(tmp_path / "summary.md")[0]
    assert row["final accuracy"] == "–" and row["decode ms mean"] == "–"
    assert row["decode ms p95"] == "–" and row["time to target (s)"] == "not reached"
    assert row["retransmissions"] == "2"
    csv_row = read_csv(tmp_path / "summary.csv")[0]
    assert csv_row["test_accuracy"] == "" and csv_row["decode_ms_p95"] == ""
    assert float(csv_row["total_virtual_time"]) == 1.5


def test_failed_jobs_are_listed_with_their_error(tmp_path: Path) -> None:
    summary = {"total_virtual_time": 2.0, "test_accuracy": 0.5, "waits": 1}
    evals = records({"kind": "eval", "virtual_time": 1.0, "test_accuracy": 0.4},
                    {"kind": "eval", "virtual_time": 2.0, "test_accuracy": 0.5})  # fmt: skip
    training_job(tmp_path, 0, "classic_cr", 0.0, summary=summary, metrics=evals)
    training_job(tmp_path, 1, "classic_cr", 0.1, summary=summary, metrics=evals)
    training_job(tmp_path, 2, "classic_cr", 0.2, error="\nRuntimeError: worker died | oom\n")
    job(tmp_path / "3", ["scheme=x"], name="other", num=3)  # no file says what it was
    (tmp_path / "4").mkdir()  # not a job: ignored
    sweep = load_sweep(tmp_path)
    assert [r.kind for r in sweep.runs] == ["train", "train", "train", "unknown"]
    write_report(sweep, tmp_path)
    rows = markdown_rows(tmp_path / "summary.md")
    assert [r["status"] for r in rows] == [
        "ok", "ok", "failed: RuntimeError: worker died \\| oom", "failed: no summary.json",
    ]  # fmt: skip
    assert rows[2]["final accuracy"] == "–" and rows[3]["scheme"] == "?"
    assert [r["error"] for r in read_csv(tmp_path / "summary.csv")][2:] == [
        "RuntimeError: worker died | oom", "",
    ]  # fmt: skip
    assert_png(tmp_path / "accuracy_vs_time.png")
    assert not (tmp_path / "decode_latency.png").exists()  # no round records


def test_sweep_without_loss_axis_plots_bars_per_configuration(tmp_path: Path) -> None:
    trace = {"_target_": "gclab.network.trace.Trace", "path": "x", "slope": 0.3}
    for num, (s, load) in enumerate([(s, load) for s in (0, 2) for load in (25, 50)]):
        job(
            tmp_path / str(num), [f"scheme.s={s}", f"delay.path=../traces/load{load:03d}.npz"],
            name="gclab.sim", num=num, choices={"scheme": "classic_cr", "delay": "trace"},
            config={"delay": trace}, summary={"total_time": 100.0 + num, "waits": num},
        )  # fmt: skip
    sweep = load_sweep(tmp_path)
    assert not sweep.numeric_loss() and sweep.series_keys() == ["scheme.s"]
    assert [sweep.series(r) for r in sweep.runs][:2] == ["classic_cr (s=0)"] * 2
    assert sweep.category(sweep.runs[1]) == "load050"
    written = {p.name for p in write_report(sweep, tmp_path)}
    assert written == {"summary.csv", "summary.md", "total_time.png"}
    assert_png(tmp_path / "total_time.png")
    assert [r["loss rate"] for r in markdown_rows(tmp_path / "summary.md")] == ["0"] * 4


GE_CHAIN = {"_target_": "gclab.network.gilbert_elliott.GilbertElliott", "p_good_bad": 0.02,
            "p_bad_good": 0.18, "loss_good": 0.0, "loss_bad": 1.0}  # fmt: skip
GE_RATE = {"_target_": "gclab.network.gilbert_elliott.GilbertElliott", "loss_rate": 0.2,
           "burst_length": 5}  # fmt: skip
TIMED = {"_target_": "gclab.network.gilbert_elliott.TimedGilbertElliott", "loss_rate": 0.3}
COMPOSITE = "gclab.network.composite.Composite"
HALF = {"_target_": BERNOULLI, "p": 0.5}


@pytest.mark.parametrize(
    ("delay", "rate"),
    [
        ({"_target_": BERNOULLI, "p": 0.05}, 0.05),
        ({"_target_": "gclab.network.base.DelayModel"}, 0.0),
        ({"_target_": "gclab.network.straggler.Straggler", "mean": 1.0}, 0.0),
        (GE_RATE, 0.2),  # exactly the configured rate (the chain's mix: 0.20000000000000004)
        (GE_CHAIN, 0.1),
        (TIMED, 0.3),
        ({"_target_": "gclab.network.trace.Trace", "path": "gone.npz"}, 0.0),  # its class: 0
        ({"_target_": COMPOSITE, "compute": HALF, "loss": HALF}, 0.75),
        ({"_target_": COMPOSITE, "compute": {"_target_": "my.Model"}, "loss": GE_RATE}, None),
        ({"_target_": BERNOULLI, "p": "${oc.env:GCLAB_TEST_UNSET_P}"}, None),
        ({"_target_": BERNOULLI, "p": 1.5}, None),  # refused by the model: no rate
        ({"_target_": "my.Model"}, None),
        (None, None),
    ],
)
def test_a_config_s_loss_rate_is_its_delay_model_s(delay: Any, rate: float | None) -> None:
    got = config_loss_rate({"delay": delay})
    assert got == rate if rate is None or delay is GE_RATE else math.isclose(got, rate)


def test_a_summary_s_loss_rate_comes_first_and_old_runs_ask_their_config(tmp_path: Path) -> None:
    """A run's summary records its model's loss rate (any model, a new one too); a run
    without it (failed, or older) gets it from the model its config builds."""
    config = {"delay": {"_target_": BERNOULLI, "p": 0.2}}
    job(tmp_path / "0", ["delay.p=0.2"], config=config, summary={"loss_rate": 0.3})
    job(tmp_path / "1", ["delay.p=0.2"], num=1, config=config, summary={"total_time": 1.0})
    job(tmp_path / "2", ["delay.p=0.2"], num=2, config=config, error="boom")
    assert [run.loss_rate for run in load_sweep(tmp_path).runs] == [0.3, 0.2, 0.2]


# --- experiment configs -------------------------------------------------------------------


def test_experiments_compose_for_their_app() -> None:
    smoke = compose_config(["experiment=smoke"])
    assert smoke.data._target_.endswith("SyntheticData") and smoke.train.rounds <= 50
    assert smoke.logger._target_ == "gclab.tracking.loggers.Logger"
    with initialize_config_dir(str(CONF_DIR), version_base="1.3"):
        sweep = compose("config", ["experiment=packet_loss_sweep"], return_hydra_config=True)
        traces = compose("sim", ["experiment=lambda_traces"], return_hydra_config=True)
    params = sweep.hydra.sweeper.params
    assert sweep.delay._target_ == BERNOULLI and sweep.network.policy == "all"
    assert params["delay.p"] == "0,0.05,0.1"
    for scheme in params.scheme.split(","):
        assert (CONF_DIR / "scheme" / f"{scheme}.yaml").is_file(), scheme
    assert traces.cluster.workers == 256 and traces.network.mu == 1.0
    assert traces.network.policy == "deadline" and traces.scheme.s is not None
    paths = [p.strip() for p in traces.hydra.sweeper.params["delay.path"].split(",")]
    assert len(paths) == 4 and all(p.startswith("../shared/traces/lambda-") for p in paths)


@pytest.mark.slow
@pytest.mark.shared
def test_lambda_traces_experiment_points_at_the_shared_traces() -> None:
    with initialize_config_dir(str(CONF_DIR), version_base="1.3"):
        traces = compose("sim", ["experiment=lambda_traces"], return_hydra_config=True)
    paths = [p.strip() for p in traces.hydra.sweeper.params["delay.path"].split(",")]
    if not (REPO.parent / "shared" / "traces").is_dir():
        pytest.skip("the shared traces are absent")
    assert all((REPO / path).is_file() for path in paths), paths  # relative to the repo root


# --- studies: runs grouped over seeds ------------------------------------------------------

GE = "gclab.network.gilbert_elliott.GilbertElliott"
T_975 = {1: 12.706204736174698, 2: 4.302652729911275}  # Student t quantiles (tables)


def study_run(
    root: Path, scheme: str, delay: dict[str, Any], seed: int, times: list[float],
    accuracy: list[float], failed: bool = False, extra: tuple[str, ...] = (),
) -> Path:  # fmt: skip
    """A finished (or failed) training run of a study, laid out as the study runner does:
    one job applied per round, an evaluation every 10 rounds (after rounds 9, 19, ...)."""
    option = "bernoulli" if delay["_target_"] == BERNOULLI else "gilbert_elliott"
    keys = [f"delay.{k}={v}" for k, v in delay.items() if k != "_target_"]
    scheme_keys = ["scheme.s=1"] if scheme != "uncoded" else []
    rounds = [{"kind": "round", "round": r, "jobs_applied": 1} for r in range(10 * len(times))]
    evals = records(*rounds, *(
        {"kind": "eval", "round": 10 * i + 9, "virtual_time": t, "test_accuracy": a}
        for i, (t, a) in enumerate(zip(times, accuracy))
    ))  # fmt: skip
    config: dict[str, Any] = {"seed": seed, "scheme": {"name": scheme}, "delay": delay}
    for override in extra:  # "network.recovery=partial" -> config["network"]["recovery"]
        dotted, value = override.split("=", 1)
        *parents, leaf = dotted.split(".")
        node = config
        for parent in parents:
            node = node.setdefault(parent, {})
        node[leaf] = value
    return job(
        root / f"{scheme}{''.join(extra)}" / f"{option}{'-'.join(keys)}" / f"seed{seed}",
        [f"scheme={scheme}", *scheme_keys, f"delay={option}", *keys, f"seed={seed}", *extra],
        num=None, choices={"scheme": scheme, "delay": option},
        config=config,
        summary=None if failed else {"scheme": scheme, "test_accuracy": accuracy[-1],
                                     "total_virtual_time": times[-1], "jobs": len(rounds)},
        metrics=None if failed else evals, error="RuntimeError: boom" if failed else None,
    )  # fmt: skip


def make_study(root: Path) -> None:
    """uncoded and classic_fr, 3 seeds each, at Bernoulli 0 and 0.1 (one classic_fr seed
    failed at 0.1; uncoded's seed 2 never reaches 0.5 there), and one classic_fr seed
    under Gilbert–Elliott bursts at the same mean loss rate."""
    no_loss, loss = {"_target_": BERNOULLI, "p": 0.0}, {"_target_": BERNOULLI, "p": 0.1}
    for k in range(3):
        study_run(root, "uncoded", no_loss, k, [10 + k, 20 + k, 30 + k], [0.3, 0.5 + k / 100, 0.7])
        study_run(root, "classic_fr", no_loss, k, [5 + k, 15 + k, 25 + k], [0.4, 0.6, 0.7])
        last = 0.49 if k == 2 else 0.55
        study_run(root, "uncoded", loss, k, [20 + 2 * k, 40 + 2 * k, 60 + 2 * k], [0.3, 0.45, last])
        study_run(root, "classic_fr", loss, k, [6 + k, 16 + k, 26 + k], [0.4, 0.6, 0.7], k == 2)
    bursts = {"_target_": GE, "loss_rate": 0.1, "burst_length": 3}
    study_run(root, "classic_fr", bursts, 0, [7, 17, 27], [0.4, 0.6, 0.7])


def test_a_baseline_named_as_its_table_names_it_pairs_two_groups_of_one_series(
    tmp_path: Path, capsys
) -> None:
    """classic_fr against classic_fr with partial recovery: one series label, two groups;
    ``--baseline classic_fr`` is the group without the extra override."""
    loss = {"_target_": BERNOULLI, "p": 0.1}
    for k in range(3):
        study_run(tmp_path / "runs", "classic_fr", loss, k, [10 + k, 20 + k], [0.4, 0.6])
        study_run(
            tmp_path / "runs", "classic_fr", loss, k, [5 + k, 8 + k * k], [0.4, 0.6],
            extra=("network.recovery=partial",),
        )  # fmt: skip
    out = tmp_path / "report"
    proc = report(capsys, str(tmp_path / "runs"), "--out", str(out), "--target", "0.5",
               "--baseline", "classic_fr")  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = {r["series"]: r for r in read_csv(out / "time_to_target.csv")}
    partial = rows["classic_fr, network.recovery=partial"]
    logs = np.log([20 / 8, 21 / 9, 22 / 12])
    assert (partial["baseline"], partial["pairs"]) == ("classic_fr", "3")
    assert float(partial["ratio"]) == pytest.approx(math.exp(logs.mean()))
    assert float(rows["classic_fr"]["ratio"]) == 1.0


def test_models_in_turn_are_compared_with_the_baselines_scheme_in_turn(tmp_path: Path) -> None:
    """classic_fr and uncoded, each on one model and on two models in turn: with
    ``--baseline classic_fr`` one model's uncoded is paired with classic_fr, two models'
    with classic_fr in turn (named beside the ratio), and both comparisons are one Holm
    family."""
    loss, turn = {"_target_": BERNOULLI, "p": 0.1}, ("train.pipeline=interleaved", "train.models=2")
    for k in range(3):
        study_run(tmp_path / "runs", "classic_fr", loss, k, [10 + k, 20 + k], [0.4, 0.6])
        study_run(tmp_path / "runs", "uncoded", loss, k, [12 + k, 40 + k], [0.4, 0.6])
        study_run(
            tmp_path / "runs", "classic_fr", loss, k, [30 + k, 40 + k], [0.4, 0.6], extra=turn
        )
        study_run(tmp_path / "runs", "uncoded", loss, k, [10 + k, 20 + 2 * k], [0.4, 0.6],
                  extra=turn)  # fmt: skip
    out = tmp_path / "report"
    write_report(load_sweep(tmp_path / "runs"), out, target=0.5, baseline="classic_fr")
    rows = {r["series"]: r for r in read_csv(out / "time_to_target.csv")}
    one, two = rows["uncoded"], rows["uncoded, pipeline=interleaved, models=2"]
    assert one["baseline"] == "classic_fr"
    assert two["baseline"] == "classic_fr, pipeline=interleaved, models=2"
    assert float(one["ratio"]) == pytest.approx(
        math.exp(np.log([20 / 40, 21 / 41, 22 / 42]).mean())
    )
    assert float(two["ratio"]) == pytest.approx(
        math.exp(np.log([40 / 20, 41 / 22, 42 / 24]).mean())
    )
    assert float(rows["classic_fr, pipeline=interleaved, models=2"]["ratio"]) == 1.0
    p_values = [paired_p(*pair) for pair in (
        ({s: 20.0 + s for s in range(3)}, {s: 40.0 + s for s in range(3)}),
        ({s: 40.0 + s for s in range(3)}, {s: 20.0 + 2 * s for s in range(3)}),
    )]  # fmt: skip
    adjusted = [a for a, _ in holm(p_values)]
    assert [float(one["p_holm"]), float(two["p_holm"])] == pytest.approx(adjusted)
    table = {r["scheme"]: r for r in markdown_rows(out / "time_to_target.md")}
    ratio = "ratio vs classic_fr (95 % interval)"
    assert table["uncoded, pipeline=interleaved, models=2"][ratio].endswith(
        "3 pairs vs classic_fr, pipeline=interleaved, models=2"
    )
    assert table["uncoded"][ratio].endswith("3 pairs")
    assert (
        table["classic_fr, pipeline=interleaved, models=2"]["Holm-corrected interval"]
        == "– (baseline)"
    )


def half_width(values: list[float]) -> float:
    x = np.asarray(values)
    return T_975[len(x) - 1] * x.std(ddof=1) / math.sqrt(len(x))


def test_study_groups_seeds_into_mean_curves_and_times_to_target(tmp_path: Path, capsys) -> None:
    make_study(tmp_path / "study")
    out = tmp_path / "report"
    proc = report(capsys, str(tmp_path / "study"), "--out", str(out), "--target", "0.5",
               "--baseline", "uncoded")  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "13 runs (1 failed)" in proc.stdout

    rows = {
        (r["series"], r["delay"], r["loss_rate"]): r for r in read_csv(out / "time_to_target.csv")
    }
    assert list(rows) == [  # by loss setting, then series (as the run folders order them)
        ("classic_fr", "bernoulli", "0.0"), ("uncoded", "bernoulli", "0.0"),
        ("classic_fr", "bernoulli", "0.1"), ("uncoded", "bernoulli", "0.1"),
        ("classic_fr", "gilbert_elliott", "0.1"),
    ]  # fmt: skip
    first = rows["uncoded", "bernoulli", "0.0"]
    assert json.loads(first["times"]) == [20.0, 21.0, 22.0] and first["reached"] == "3"
    assert first["horizon"] == "inf"  # every run reached it without a budget: no restriction
    assert float(first["km_median"]) == 21.0 and float(first["rmst"]) == 21.0
    assert float(first["rmst_high"]) == pytest.approx(21.0 + half_width([20, 21, 22]))
    lossy = rows["uncoded", "bernoulli", "0.1"]  # seed 2 missed 0.5: censored at its end, 64
    assert json.loads(lossy["times"]) == [60.0, 62.0, None] and lossy["reached"] == "2"
    assert float(lossy["horizon"]) == 64.0 and json.loads(lossy["restricted"]) == [60, 62, 64]
    assert float(lossy["rmst"]) == 62.0 and float(lossy["km_median"]) == 62.0
    assert float(lossy["rmst_low"]) == pytest.approx(62.0 - half_width([60, 62, 64]))
    assert float(lossy["rmst_high"]) == 64.0  # clipped to the horizon
    fr = rows["classic_fr", "bernoulli", "0.1"]
    assert (fr["runs"], fr["finished"], fr["reached"], fr["pairs"]) == ("3", "2", "2", "2")
    assert (json.loads(fr["seeds"]), json.loads(fr["times"])) == ([0, 1], [16.0, 17.0])
    logs = np.log([60 / 16, 62 / 17])  # paired by seed: uncoded's time over classic_fr's
    assert float(fr["ratio"]) == pytest.approx(math.exp(logs.mean()))
    assert float(fr["ratio_high"]) == pytest.approx(math.exp(logs.mean() + half_width(logs)))
    assert (fr["baseline"], fr["label"], fr["aa_floor"]) == ("uncoded", "faster", "")
    assert rows["uncoded", "bernoulli", "0.1"]["label"] == "not distinguishable"  # itself
    alone = rows["classic_fr", "gilbert_elliott", "0.1"]
    assert (alone["rmst"], alone["rmst_low"], alone["label"]) == ("17.0", "17.0", "")
    for row in rows.values():  # no column holds a mean over the runs that reached the target
        assert not {"mean", "ci95_low", "min", "speedup_mean", "jobs_mean"} & set(row)

    table = [r for r in markdown_rows(out / "summary.md") if "reached" in r]
    assert table == markdown_rows(out / "time_to_target.md")
    columns = ("scheme", "reached", "KM median (s)", "horizon (s)",
               "restricted mean (s), 95 % interval")  # fmt: skip

    def interval(values: list[float], high: float | None = None) -> str:
        mean, half = np.mean(values), half_width(values)
        return f"{mean:.1f} ({mean - half:.1f}–{high or mean + half:.1f})"

    assert [tuple(r[c] for c in columns) for r in table] == [
        ("classic_fr", "3/3", "16.0", "∞", interval([15, 16, 17])),
        ("uncoded", "3/3", "21.0", "∞", interval([20, 21, 22])),
        ("classic_fr", "2/2", "16.0", "64.0", interval([16, 17])),
        ("uncoded", "2/3", "62.0", "64.0", interval([60, 62, 64], high=64.0)),
        ("classic_fr", "1/1", "17.0", "∞", "17.0"),
    ]  # fmt: skip
    assert [r["jobs to target (KM median)"] for r in table] == ["20"] * 3 + ["30", "20"]
    assert (
        table[1]["s per job"]
        == f"{np.mean([30, 31, 32]) / 30:.4f} ± {half_width([1, 31 / 30, 32 / 30]):.4f}"
    )
    lossy = rows["uncoded", "bernoulli", "0.1"]  # 2 of 3 seeds reached at 30 jobs; all 3 paced
    assert float(lossy["jobs_km_median"]) == 30.0
    assert float(lossy["seconds_per_job_mean"]) == pytest.approx(np.mean([60, 62, 64]) / 30)
    finals = [0.55, 0.55, 0.49]  # seed 2 ends below the target at its budget
    assert float(lossy["final_accuracy_mean"]) == pytest.approx(np.mean(finals))
    assert float(lossy["final_accuracy_ci95_low"]) == pytest.approx(
        np.mean(finals) - half_width(finals)
    )
    assert table[3]["final accuracy"] == f"{np.mean(finals):.3f} ± {half_width(finals):.3f}"
    assert table[4]["final accuracy"] == "0.700"  # one seed
    logs = np.log([20 / 15, 21 / 16, 22 / 17])
    low, high = np.exp(logs.mean() - half_width(logs)), np.exp(logs.mean() + half_width(logs))
    ratio = "ratio vs uncoded (95 % interval)"
    assert table[0][ratio] == f"{np.exp(logs.mean()):.2f} ({low:.2f}–{high:.2f}), 3 pairs"
    holm = "Holm-corrected interval"  # two comparisons: the smaller p at level 0.05 / 2
    t_9875 = 6.205346816570706  # Student t at 1 - 0.05 / 4 with 2 degrees of freedom (tables)
    spread = t_9875 * logs.std(ddof=1) / math.sqrt(3)
    corrected = [np.exp(logs.mean() + sign * spread) for sign in (-1, 1)]
    assert (table[0][holm], table[0]["label"]) == ("{:.2f}–{:.2f}".format(*corrected), "faster")
    assert (table[1][ratio], table[1][holm], table[1]["label"]) == (
        "1.00 (1.00–1.00), 3 pairs", "– (baseline)", "not distinguishable")  # fmt: skip
    assert (table[4][ratio], table[4]["label"]) == ("–", "–")  # no uncoded run under bursts
    pivot = [r for r in markdown_rows(out / "summary.md") if "uncoded" in r]
    assert pivot == markdown_rows(out / "time_to_target_by_loss.md")
    assert [(r["delay"], r["loss rate"], r["horizon (s)"], r["classic_fr"], r["uncoded"])
            for r in pivot] == [
        ("bernoulli", "0", "∞", interval([15, 16, 17]) + " ▲", interval([20, 21, 22])),
        ("bernoulli", "0.1", "64.0", interval([16, 17]) + " ▲",
         interval([60, 62, 64], high=64.0) + " (2/3)"),  # seed 2 did not reach it
        ("gilbert_elliott", "0.1", "∞", "17.0", "–"),  # no uncoded run under these bursts
    ]  # fmt: skip

    curves = [r for r in read_csv(out / "curves.csv") if r["series"] == "uncoded"]
    grid = [float(r["virtual_time"]) for r in curves if r["loss_rate"] == "0.0"]
    assert grid == [12.0, 20.0, 21.0, 22.0, 30.0]  # every seed's times in [12, 30]
    at_12 = [0.3 + 0.2 * 0.2, 0.3 + 0.21 * 0.1, 0.3]  # linear between evaluations
    assert float(curves[0]["accuracy_mean"]) == pytest.approx(np.mean(at_12))
    assert float(curves[0]["band_high"]) == pytest.approx(np.mean(at_12) + half_width(at_12))
    assert {r["seeds"] for r in curves} == {"3"} and {r["band"] for r in curves} == {"ci"}
    for name in ("accuracy_vs_time.png", "total_time.png"):
        assert_png(out / name)


def test_an_a_a_control_that_fails_invalidates_every_label(tmp_path: Path, capsys) -> None:
    """Declared A/A at Bernoulli 0 (classic_fr against uncoded there, ratio ≈ 0.76, its
    interval excluding 1): the control fails, so every label reads 'invalid (A/A)', even
    classic_fr's 3.7x at 0.1; study v2's floor rule survives as the sensitivity label."""
    make_study(tmp_path / "study")
    out = tmp_path / "report"
    proc = report(capsys, str(tmp_path / "study"), "--out", str(out), "--target", "0.5",
               "--baseline", "uncoded", "--aa", "classic_fr", "uncoded", "--aa-at",
               "bernoulli:0")  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    logs = np.log([15 / 20, 16 / 21, 17 / 22])
    floor = math.exp(max(abs(logs.mean() - half_width(logs)), abs(logs.mean() + half_width(logs))))
    rows = {
        (r["series"], r["delay"], r["loss_rate"]): r for r in read_csv(out / "time_to_target.csv")
    }
    rows = {(name, rate): r for (name, delay, rate), r in rows.items() if delay == "bernoulli"}
    assert float(rows["classic_fr", "0.0"]["aa_floor"]) == pytest.approx(floor)
    assert float(rows["classic_fr", "0.0"]["ratio_low"]) > 1
    assert rows["classic_fr", "0.0"]["control"] == "True"  # the A/A arm: outside the family
    assert rows["classic_fr", "0.1"]["label"] == "invalid (A/A)"
    assert rows["classic_fr", "0.1"]["floor_label"] == "faster"  # v2's rule: beyond the floor
    assert rows["classic_fr", "0.0"]["floor_label"] == "not distinguishable"
    control = markdown_rows(out / "aa_control.md")
    assert control == [{"loss setting": "bernoulli 0", "classic_fr / uncoded (95 % interval)":
                        control[0]["classic_fr / uncoded (95 % interval)"], "pairs": "3",
                        "A/A control": "fails: the study is invalid"}]  # fmt: skip
    text = (out / "summary.md").read_text()
    assert "## A/A control" in text and f"| bernoulli 0 | {np.exp(logs.mean()):.2f} (" in text
    assert f"×{floor:.2f}" in text
    for aa, message in [(["classic_fr", "nope"], "--aa 'nope' is none of the groups"),
                        (["classic_fr", "classic_fr"], "an A/A pair is two groups"),
                        (["classic_fr", "uncoded", "--aa-at", "gilbert_elliott"],
                         "at gilbert_elliott, and these do not")]:  # fmt: skip
        proc = report(capsys, str(tmp_path / "study"), "--out", str(tmp_path / "no"),
                   "--target", "0.5", "--aa", *aa)  # fmt: skip
        assert proc.returncode == 2 and message in proc.stderr, proc.stderr
        assert len(proc.stderr.strip().splitlines()) == 1 and not (tmp_path / "no").exists()


def test_a_smoothed_crossing_moves_the_time_to_target(tmp_path: Path) -> None:
    """uncoded without loss reads 0.3, 0.50–0.52, 0.7: the mean of the last two evaluations
    first reaches 0.5 at the third, so each seed's time is its third evaluation's."""
    make_study(tmp_path / "study")
    write_report(load_sweep(tmp_path / "study"), tmp_path / "out", target=0.5, smooth=2)
    rows = {(r["series"], r["delay"], r["loss_rate"]): r
            for r in read_csv(tmp_path / "out" / "time_to_target.csv")}  # fmt: skip
    assert json.loads(rows["uncoded", "bernoulli", "0.0"]["times"]) == [30.0, 31.0, 32.0]
    assert "mean of its last 2 evaluations" in (tmp_path / "out" / "summary.md").read_text()


def test_range_band_and_a_study_without_target(tmp_path: Path) -> None:
    make_study(tmp_path)
    sweep = load_sweep(tmp_path)
    assert [g.label for g in groups(sweep)][:2] == ["classic_fr", "uncoded"]  # s=1: all coded
    written = {p.name for p in write_report(sweep, tmp_path / "out", band="range")}
    assert "time_to_target.csv" not in written and "curves.csv" in written
    first = next(r for r in read_csv(tmp_path / "out" / "curves.csv") if r["series"] == "uncoded")
    assert (float(first["band_low"]), float(first["band_high"])) == pytest.approx((0.3, 0.34))
    assert "Time to test accuracy" not in (tmp_path / "out" / "summary.md").read_text()


def test_mean_curves_are_drawn_with_every_seed_beside_them(tmp_path: Path, monkeypatch) -> None:
    """A mean covers only the span every seed covers; each seed's own line goes on past it."""
    make_study(tmp_path)
    figures = []
    monkeypatch.setattr(plots, "_save", lambda fig, path: figures.append(fig) or path)
    plots.accuracy_vs_time(load_sweep(tmp_path), tmp_path / "plot.png")
    no_loss = figures[0].axes[0]  # classic_fr and uncoded, 3 seeds each
    lines = [(line.get_linewidth(), list(line.get_xdata())) for line in no_loss.get_lines()]
    seed_lines = [x for width, x in lines if width < 1]
    assert sorted(x[-1] for x in seed_lines) == [25, 26, 27, 30, 31, 32]  # each seed's end
    means = [x for width, x in lines if width >= 1]
    assert sorted(x[-1] for x in means) == [25, 30]  # the earliest last evaluation


def test_bands_are_drawn_inside_the_range_of_an_accuracy(tmp_path: Path, monkeypatch) -> None:
    """Two seeds far apart: the 95 % t-interval (t = 12.7) spans far beyond [0, 1]."""
    for seed, accuracy in enumerate([[0.1, 0.2, 0.3], [0.8, 0.9, 0.95]]):
        study_run(tmp_path, "uncoded", {"_target_": BERNOULLI, "p": 0.0}, seed, [10, 20, 30],
                  accuracy)  # fmt: skip
    figures = []
    monkeypatch.setattr(plots, "_save", lambda fig, path: figures.append(fig) or path)
    plots.accuracy_vs_time(load_sweep(tmp_path), tmp_path / "plot.png")
    (band,) = figures[0].axes[0].collections
    drawn = np.concatenate([path.vertices[:, 1] for path in band.get_paths()])
    assert drawn.min() == 0.0 and drawn.max() == 1.0


def test_the_legend_takes_a_spare_grid_cell_else_goes_below_the_panels(
    tmp_path: Path, monkeypatch
) -> None:
    figures = []
    monkeypatch.setattr(plots, "_save", lambda fig, path: figures.append(fig) or path)
    make_study(tmp_path)  # 3 loss settings: one row of 3 panels, no spare cell
    plots.accuracy_vs_time(load_sweep(tmp_path), tmp_path / "plot.png")
    (below,) = figures[0].legends
    assert [t.get_text() for t in below.get_texts()] == ["classic_fr", "uncoded"]
    assert below.get_title().get_text() == "scheme"
    heavier = {"_target_": BERNOULLI, "p": 0.2}
    study_run(tmp_path, "uncoded", heavier, 0, [30, 60, 90], [0.3, 0.4, 0.5])
    plots.accuracy_vs_time(load_sweep(tmp_path), tmp_path / "plot.png")
    assert not figures[1].legends  # 4 panels in a 2 × 3 grid: cells 5 and 6 are spare
    spare = figures[1].axes[4]
    assert not spare.axison and spare.get_legend() is not None
    assert [t.get_text() for t in spare.get_legend().get_texts()] == ["classic_fr", "uncoded"]


def test_each_training_run_shows_the_compute_speed_its_clock_measured(tmp_path: Path) -> None:
    """The median of the workers' compute seconds and the processors they ran on: runs on
    a slower machine have a slower virtual clock, and the table shows why."""
    cpu = "AMD EPYC (AVX2)"
    for seed, compute in ((0, [[0.06, 0.07], [0.05, 0.08]]), (1, [[0.09, 0.09], [0.09, 0.10]])):
        rounds = [{"kind": "round", "round": r, "compute_s": c} for r, c in enumerate(compute)]
        job(
            tmp_path / "sweep" / str(seed), [f"seed={seed}"], num=seed,
            summary={"scheme": "uncoded", "processors": [cpu]}, metrics=records(*rounds),
        )  # fmt: skip
    job(tmp_path / "sweep" / "2", ["seed=2"], num=2, summary={"scheme": "uncoded"}, metrics="")
    write_report(load_sweep(tmp_path / "sweep"), tmp_path / "out")
    rows = {r["job"]: r for r in read_csv(tmp_path / "out" / "summary.csv")}
    assert [rows[j]["compute_s_median"] for j in "012"] == ["0.065", "0.09", ""]
    assert [rows[j]["processors"] for j in "012"] == [json.dumps([cpu])] * 2 + [""]
    table = (tmp_path / "out" / "summary.md").read_text()
    assert "| compute s per worker-round (median) | processors |" in table
    assert f"| 0.0650 | {cpu} | ok |" in table and f"| 0.0900 | {cpu} | ok |" in table
    assert "| – | – | ok |" in table  # no compute records, no processors: shown as unknown


def test_stale_updates_are_counted_from_the_rounds_jobs_applied(tmp_path: Path) -> None:
    """Jobs applied per round 0, 0, 3, 1, 1: jobs 1 and 2 were computed on the weights of
    rounds 1 and 2, which still lacked job 0 (and 1): staleness 0, 1, 2, 0, 0. With three
    interleaved models the same rounds are exact SGD per model; with a round missing from
    the records the staleness is unknown."""
    applied = [0, 0, 3, 1, 1]
    rounds = [{"kind": "round", "round": r, "jobs_applied": a} for r, a in enumerate(applied)]
    assert list(staleness(rounds)) == [0, 1, 2, 0, 0]
    assert list(staleness(rounds, models=3)) == [0] * 5
    assert staleness(rounds[:2] + rounds[3:]).size == 0
    sweep = tmp_path / "sweep"
    for num, pipeline in enumerate(("stale", "interleaved")):
        job(
            sweep / str(num), [f"train.pipeline={pipeline}"], num=num,
            choices={"scheme": "pipelined_cr", "delay": "bernoulli"},
            config={"scheme": {"T": 2}, "train": {"pipeline": pipeline, "target_accuracy": 0.5},
                    "delay": {"_target_": BERNOULLI, "p": 0.1}, "seed": num},
            summary={"scheme": "pipelined_cr", "jobs": 5, "total_virtual_time": 5.0},
            metrics=records(*rounds, {"kind": "eval", "round": 4, "virtual_time": 5.0,
                                      "test_accuracy": 0.6}),
        )  # fmt: skip
    write_report(load_sweep(sweep), tmp_path / "out", target=0.5)
    rows = {r["job"]: r for r in read_csv(tmp_path / "out" / "summary.csv")}
    assert (rows["0"]["stale_share"], rows["0"]["staleness_mean"]) == ("0.4", "0.6")
    assert (rows["1"]["stale_share"], rows["1"]["staleness_mean"]) == ("0.0", "0.0")
    table = {r["job"]: r for r in markdown_rows(tmp_path / "out" / "summary.md") if "job" in r}
    assert (table["0"]["stale updates (%)"], table["0"]["mean staleness"]) == ("40.0", "0.600")
    shares = [r["stale_share_mean"] for r in read_csv(tmp_path / "out" / "time_to_target.csv")]
    assert sorted(map(float, shares)) == [0.0, 0.4]
    groups_table = [r for r in markdown_rows(tmp_path / "out" / "summary.md") if "reached" in r]
    assert sorted((r["scheme"], r["stale updates (%)"]) for r in groups_table) == [
        ("pipelined_cr, pipeline=interleaved", "0.0"),
        ("pipelined_cr, pipeline=stale", "40.0"),
    ]
    write_report(load_sweep(sweep), tmp_path / "out", target=0.7)  # reached by no seed
    pivot = {  # more series than loss settings: one row per series
        r["series"]: r["bernoulli 0.1 (h = 5.0 s)"]
        for r in markdown_rows(tmp_path / "out" / "summary.md")
        if "series" in r
    }
    assert pivot == {  # the pipeline is no series key here (no loss axis), yet tells them apart
        "pipelined_cr, pipeline=interleaved": "not reached (final 0.60)",
        "pipelined_cr, pipeline=stale": "not reached (final 0.60) [40.0 %]",
    }


def reaching(sweep: Path, num: int, scheme: str, p: float, seed: int, time: float,
             **overrides: Any) -> None:  # fmt: skip
    """A training run of ``scheme`` at Bernoulli ``p`` that reaches 0.7 at ``time``, with
    other ``overrides`` (config key with dots as __: ``cluster__workers=4``)."""
    extra = {key.replace("__", "."): value for key, value in overrides.items()}
    config: dict[str, Any] = {
        "scheme": {"name": scheme},
        "delay": {"_target_": BERNOULLI, "p": p},
        "seed": seed,
    }
    for key, value in extra.items():
        section, field = key.split(".")
        config.setdefault(section, {})[field] = value
    job(
        sweep / str(num),
        [f"scheme={scheme}", f"delay.p={p}", *(f"{k}={v}" for k, v in extra.items()),
         f"seed={seed}"],
        num=num, choices={"scheme": scheme, "delay": "bernoulli"}, config=config,
        summary={"scheme": scheme, "jobs": 10, "total_virtual_time": time},
        metrics=records({"kind": "eval", "round": 9, "virtual_time": time, "test_accuracy": 0.7}),
    )  # fmt: skip


def test_groups_of_one_label_are_named_and_paired_by_their_other_overrides(tmp_path):
    """Without a loss axis the workers are no series key, yet tell groups apart, and each
    classic_cr group's speed-up is over the uncoded group with its workers."""
    sweep, num = tmp_path / "sweep", 0
    times = {("uncoded", 4): 40.0, ("uncoded", 8): 20.0, ("classic_cr", 4): 10.0,
             ("classic_cr", 8): 10.0}  # fmt: skip
    for (scheme, workers), time in times.items():
        for seed in (0, 1):
            reaching(sweep, num, scheme, 0.1, seed, time + seed, cluster__workers=workers)
            num += 1
    write_report(load_sweep(sweep), tmp_path / "out", target=0.5, baseline="uncoded")
    rows = {r["series"]: r for r in read_csv(tmp_path / "out" / "time_to_target.csv")}
    assert sorted(rows) == [
        "classic_cr, cluster.workers=4", "classic_cr, cluster.workers=8",
        "uncoded, cluster.workers=4", "uncoded, cluster.workers=8",
    ]  # fmt: skip
    assert float(rows["classic_cr, cluster.workers=4"]["ratio"]) == pytest.approx(
        math.sqrt(40 / 10 * 41 / 11)  # the geometric mean over the two seeds
    )
    assert float(rows["classic_cr, cluster.workers=8"]["ratio"]) == pytest.approx(
        math.sqrt(20 / 10 * 21 / 11)
    )
    pivot = [r for r in markdown_rows(tmp_path / "out" / "summary.md") if "series" in r]
    assert len(pivot) == 4  # four series, one loss setting: a row each


def test_a_key_only_some_runs_set_alike_still_tells_their_groups_apart(tmp_path):
    """Against the loss rate the label leaves out train.pipeline (every run that sets it
    sets it alike); uncoded with and without it are two groups all the same."""
    sweep, num = tmp_path / "sweep", 0
    for p, time in ((0.1, 10.0), (0.2, 20.0)):
        reaching(sweep, num, "uncoded", p, 0, time)
        reaching(sweep, num + 1, "uncoded", p, 0, time + 5, train__pipeline="stale")
        num += 2
    all_groups = groups(load_sweep(sweep))
    assert [(g.label, g.name) for g in all_groups] == [
        ("uncoded", "uncoded"), ("uncoded", "uncoded, pipeline=stale"),
    ] * 2  # fmt: skip
    write_report(load_sweep(sweep), tmp_path / "out", target=0.5)
    pivot = [r for r in markdown_rows(tmp_path / "out" / "summary.md") if "loss rate" in r
             and "reached" not in r and "job" not in r]  # fmt: skip
    assert [(r["uncoded"], r["uncoded, pipeline=stale"]) for r in pivot] == [
        ("10.0", "15.0"), ("20.0", "25.0"),
    ]  # fmt: skip
