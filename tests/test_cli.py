"""``python -m gclab`` end to end, as a user runs it (subprocesses, real Ray, offline W&B),
and what the command line prints when a run fails (:mod:`gclab.cli`)."""

import json
import os
import shutil
import subprocess
import sys
import time

import pytest
import torch
from hydra import compose, initialize_config_dir
from hydra.errors import ConfigCompositionException

from gclab import CONF_DIR
from gclab.app import main as gclab_main
from gclab.cli import one_line, other_app
from gclab.tracking.artifacts import load_checkpoint, read_metrics
from helpers.config import TINY
from helpers.net import free_port
from helpers.raycluster import ray_cluster

REPO = CONF_DIR.parents[1]


def composition_error(overrides: list[str]) -> ConfigCompositionException:
    with (
        pytest.raises(ConfigCompositionException) as info,
        initialize_config_dir(str(CONF_DIR), version_base="1.3"),
    ):
        compose("config", overrides=overrides)
    return info.value


@pytest.mark.parametrize(
    ("overrides", "line"),
    [
        (["train.lrr=0.1"], "Could not override 'train.lrr': Key 'lrr' not in 'TrainConfig'. "
         "To append to your config use +train.lrr=0.1."),
        (["train.batch_size=lots"], "Error merging override train.batch_size=lots: Value 'lots' "
         "of type 'str' could not be converted to Integer."),
        (["scheme=nope"], "In 'config': Could not find 'scheme/nope'. Available options in "
         "'scheme': cce_cr, cce_fr, classic_cr, classic_fr, ignore_stragglers, is_cr, "
         "is_hr, m_sgc, pipelined_cr, pipelined_fr, sr_sgc, uncoded."),
    ],
    ids=["misspelt-key", "wrong-type", "unknown-option"],
)  # fmt: skip
def test_schema_errors_read_as_one_line(overrides: list[str], line: str) -> None:
    assert one_line(composition_error(overrides)) == line


def test_an_experiment_of_one_app_is_refused_by_the_other_in_one_sentence() -> None:
    composition_error(["experiment=lambda_traces"])  # what the sentence replaces
    assert other_app("config", ["train.rounds=3", "experiment=lambda_traces"]) == (
        "experiment=lambda_traces belongs to the simulator "
        "(gclab/conf/experiment/lambda_traces.yaml): run it with python -m gclab.sim "
        "experiment=lambda_traces."
    )
    assert other_app("sim", ["experiment=smoke"]).endswith(
        "run it with python -m gclab experiment=smoke."
    )
    assert other_app("config", ["experiment=smoke"]) is None  # its own app: not the problem
    assert other_app("config", ["-m", "experiment=smoke,packet_loss_sweep"]) is None
    assert other_app("config", ["train.lrr=1"]) is None


def gclab(
    *args: str, cwd=None, timeout: float = 240, env: dict | None = None, module: str = "gclab"
) -> subprocess.CompletedProcess:
    env = {**os.environ, "WANDB_MODE": "offline", "WANDB_SILENT": "true", **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", module, *args],
        capture_output=True, text=True, timeout=timeout, cwd=cwd, env=env,
    )  # fmt: skip


@pytest.mark.slow
def test_run_writes_metrics_summary_checkpoint_and_offline_wandb(tmp_path):
    out = tmp_path / "run"
    overrides = [o for o in TINY if not o.startswith("logger")]
    proc = gclab(
        *overrides, "train.eval_every=2", "logger.mode=offline", f"hydra.run.dir={out}",
        cwd=tmp_path,  # any working directory works
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    records = read_metrics(out / "metrics.jsonl")
    rounds = [r for r in records if r["kind"] == "round"]
    evals = [r for r in records if r["kind"] == "eval"]
    assert [r["round"] for r in rounds] == [0, 1, 2, 3]
    assert [r["round"] for r in evals] == [1, 3]
    assert all(r["decode_ms"] >= 0 and r["train_loss"] > 0 for r in rounds)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["test_accuracy"] == evals[-1]["test_accuracy"]
    assert summary["jobs"] == 4 and summary["total_virtual_time"] > 0
    ckpt = load_checkpoint(out / "checkpoint.pt")
    assert ckpt["round"] == 3 and "optimizer" in ckpt and ckpt["model"]
    runs = list((out / "wandb").glob("offline-run-*/run-*.wandb"))
    assert len(runs) == 1 and runs[0].stat().st_size > 0
    assert (out / ".hydra" / "config.yaml").is_file()


@pytest.mark.slow
def test_bad_value_exits_with_one_sentence_before_ray(tmp_path):
    proc = gclab(*TINY, "cluster.workers=0", f"hydra.run.dir={tmp_path}")
    assert proc.returncode == 2
    assert "gclab: error: cluster.workers=0 is invalid" in proc.stderr
    assert "Traceback" not in proc.stderr and "Started a local Ray" not in proc.stderr
    assert not (tmp_path / "metrics.jsonl").exists()


def test_an_override_outside_hydras_grammar_exits_with_one_sentence_naming_it(
    tmp_path, monkeypatch, capsys
):
    """``python -m gclab``'s own ``main`` in this process (the line comes before Hydra
    composes anything; the slow tests here run the real command)."""
    argv = ["gclab", *TINY, "data.root=~/cifar", f"hydra.run.dir={tmp_path}"]
    monkeypatch.setattr(sys, "argv", argv)
    with pytest.raises(SystemExit) as exit_:
        gclab_main()
    assert exit_.value.code == 2
    assert capsys.readouterr().err.strip().splitlines() == [
        "gclab: error: cannot parse the override 'data.root=~/cifar': a value with characters "
        "such as ~ * ? [ ] ( ) { } or spaces needs quotes, e.g. data.root='/path/with space', "
        "and a home directory is spelt $HOME/... (the shell does not expand ~ after '=')."
    ]
    assert not tmp_path.exists() or not any(tmp_path.iterdir())


@pytest.mark.slow
def test_help_lists_the_config_groups():
    proc = gclab("--help", timeout=60)
    assert proc.returncode == 0
    for group in ("scheme", "model", "data", "cluster", "delay", "logger"):
        assert f"{group}:" in proc.stdout or f"{group}/" in proc.stdout


@pytest.mark.slow
def test_spread_puts_workers_on_both_nodes_and_changes_no_weight(tmp_path, two_nodes):
    """``cluster=ray`` joins a real head node (a private local Ray would have one node, so
    spread's 2 shows the join). Two Ray nodes of 2 CPUs: both actors fit on one, so only
    ``spread`` uses both."""
    address, auth = two_nodes
    runs = {}
    for placement in ("spread", "pack"):
        out = tmp_path / placement
        proc = gclab(
            *TINY, "cluster=ray", f"cluster.address={address}", "cluster.workers=4",
            "cluster.actors=2", "cluster.worker_cpus=0.5", f"cluster.placement={placement}",
            f"hydra.run.dir={out}", env=auth,
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr[-3000:]
        runs[placement] = json.loads((out / "summary.json").read_text())["nodes"]
    assert runs == {"spread": 2, "pack": 1}
    spread = load_checkpoint(tmp_path / "spread" / "checkpoint.pt")["model"]
    pack = load_checkpoint(tmp_path / "pack" / "checkpoint.pt")["model"]
    assert all(torch.equal(spread[k], pack[k]) for k in spread)


#: Holds ``argv[2]`` CPUs of the cluster at ``argv[1]`` until it is killed (a detached
#: placement group would hold them too, but makes stopping the cluster take ~30 s).
HOLD_CPUS = """
import sys, time, ray
from ray.util.placement_group import placement_group
ray.init(address=sys.argv[1], log_to_driver=False)
ray.get(placement_group([{"CPU": float(sys.argv[2])}]).ready(), timeout=120)
print("held", flush=True)
time.sleep(600)
"""


def refusal(run_dir, *overrides: str, env: dict[str, str]) -> str:
    """The one line of a run that ended before round 0 (exit 2, no traceback, no round)."""
    proc = gclab(*TINY, *overrides, f"hydra.run.dir={run_dir}", env=env)
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr
    metrics = run_dir / "metrics.jsonl"
    assert not metrics.exists() or metrics.read_text() == ""  # no round ran
    return proc.stderr.strip().splitlines()[-1]


@pytest.mark.slow
def test_workers_a_cluster_cannot_host_end_the_run_before_round_0_in_one_sentence(tmp_path):
    """On a 2-CPU node: 4 actors of 1 CPU are more than it has, refused at once; 2 such
    actors while another client holds both CPUs wait for them until cluster.timeout."""
    with ray_cluster(2) as (address, auth):
        ray = ["cluster=ray", f"cluster.address={address}", "cluster.timeout=5"]
        start = time.monotonic()
        never = refusal(tmp_path / "never", *ray, "cluster.workers=4", "cluster.actors=4",
                        env=auth)  # fmt: skip
        holder = subprocess.Popen(
            [sys.executable, "-c", HOLD_CPUS, address, "2"],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
            env={**os.environ, **auth},
        )  # fmt: skip
        try:
            assert holder.stdout.readline() == "held\n"
            busy = refusal(tmp_path / "busy", *ray, "cluster.workers=2", "cluster.actors=2",
                           env=auth)  # fmt: skip
        finally:
            holder.kill()
            holder.wait()
    assert never == (
        "gclab: error: the worker actors can never start: they ask for 4 CPUs "
        "(cluster.actors=4 x cluster.worker_cpus=1) while the Ray cluster has 2 CPUs "
        "(at most 2 on one node); lower cluster.worker_cpus/worker_gpus or "
        "cluster.actors, or add nodes."
    )
    assert busy == (
        "gclab: error: 2 of the 2 worker actors did not start within 5 s: they ask for "
        "2 CPUs (cluster.actors=2 x cluster.worker_cpus=1) while the Ray cluster had "
        "0 of its 2 CPUs free; lower cluster.worker_cpus/worker_gpus or "
        "cluster.actors, or add nodes."
    )
    assert time.monotonic() - start < 180  # the deadline, not a wait for resources


@pytest.mark.slow
def test_cluster_ray_with_nobody_listening_fails_clearly_and_quickly(tmp_path):
    start = time.time()
    proc = gclab(
        *TINY, "cluster=ray", f"cluster.address=127.0.0.1:{free_port()}",
        f"hydra.run.dir={tmp_path}", timeout=120,
    )  # fmt: skip
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert "no Ray cluster answered" in proc.stderr
    assert time.time() - start < 90


@pytest.mark.slow
def test_sweep_runs_every_job_with_a_shared_key_and_reports_a_failing_one(tmp_path):
    proc = gclab(
        "-m", *TINY, "train.rounds=2", "scheme=classic_cr,pipelined_cr", "scheme.s=1",
        "cluster.workers=4,0", f"hydra.sweep.dir={tmp_path}",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "gclab: error: cluster.workers=0 is invalid" in proc.stderr
    for job, scheme in [(0, "classic_cr"), (2, "pipelined_cr")]:
        summary = json.loads((tmp_path / str(job) / "summary.json").read_text())
        assert summary["scheme"] == scheme and summary["jobs"] == 2
        config = (tmp_path / str(job) / ".hydra" / "config.yaml").read_text()
        assert "  s: 1\n" in config
        assert not (tmp_path / str(job) / "error.txt").exists()
    for job in (1, 3):
        assert "cluster.workers=0 is invalid" in (tmp_path / str(job) / "error.txt").read_text()
        assert not (tmp_path / str(job) / "summary.json").exists()


@pytest.mark.slow
@pytest.mark.parametrize(
    ("module", "target", "args"),
    [
        ("gclab", "gclab.ml.models.SmallCNN", [*TINY]),
        ("gclab.sim", "gclab.network.bernoulli.Bernoulli", ["delay=bernoulli", "sim.jobs=3"]),
    ],
)
def test_a_bug_shows_its_traceback_and_exits_1(tmp_path, module, target, args):
    """A constructor that fails with an error that is not a ConfigError is a bug, not bad input."""
    owner, name = target.rsplit(".", 1)
    script = (
        # the schemas are derived from the real signatures first, then the constructor breaks
        f"import runpy, sys, gclab.config; import {owner} as m\n"
        "def broken(*args, **kwargs): raise ZeroDivisionError('injected bug')\n"
        f"m.{name}.__init__ = broken\n"
        f"sys.argv = ['{module}', *sys.argv[1:]]\n"
        f"runpy.run_module('{module}', run_name='__main__')\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", script, *args, f"hydra.run.dir={tmp_path}"],
        capture_output=True, text=True, timeout=240,
        env={**os.environ, "WANDB_MODE": "offline", "WANDB_SILENT": "true"},
    )  # fmt: skip
    assert proc.returncode == 1, proc.stderr[-3000:]
    assert "Traceback" in proc.stderr and "ZeroDivisionError: injected bug" in proc.stderr
    lines = proc.stderr.splitlines()
    assert not any(line.startswith(("gclab: error:", "gclab.sim:")) for line in lines)


@pytest.mark.slow
def test_a_built_wheel_runs_both_apps_from_any_directory(tmp_path):
    """The configs ship inside the package: no source tree needed, only the wheel."""
    src = tmp_path / "src"
    src.mkdir()
    for name in ("pyproject.toml", "setup.cfg", "README.md"):
        shutil.copy(REPO / name, src / name)
    for package in ("gclab", "hydra_plugins"):
        shutil.copytree(REPO / package, src / package, ignore=shutil.ignore_patterns("__pycache__"))
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
    build = [*pip, "wheel", str(src), "--no-deps", "--no-build-isolation", "-w", tmp_path / "dist"]
    subprocess.run(build, check=True, capture_output=True, timeout=300)
    (wheel,) = (tmp_path / "dist").glob("gclab-*.whl")
    target = tmp_path / "site"
    subprocess.run(
        [*pip, "install", "--target", target, "--no-deps", wheel],
        check=True, capture_output=True, timeout=300,
    )  # fmt: skip
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = {**os.environ, "PYTHONPATH": str(target)}  # dependencies from site-packages
    where = subprocess.run(
        [sys.executable, "-c", "import gclab; print(gclab.__file__)"],
        cwd=elsewhere, env=env, capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert where.stdout.startswith(str(target))  # the wheel's copy, not the source tree
    job = gclab("--cfg", "job", cwd=elsewhere, env=env, timeout=120)
    assert job.returncode == 0, job.stderr[-2000:]
    assert "scheme:" in job.stdout and "train:" in job.stdout
    launcher = gclab("hydra/launcher=ray", "--cfg", "hydra", "-p", "hydra.launcher._target_",
                     cwd=elsewhere, env=env, timeout=120)  # fmt: skip
    assert launcher.returncode == 0, launcher.stderr[-2000:]
    assert "gclab_launcher.ray_launcher.RayLauncher" in launcher.stdout  # the plugin shipped
    sim = gclab("sim.jobs=5", f"hydra.run.dir={tmp_path / 'sim'}", cwd=elsewhere, env=env,
                module="gclab.sim", timeout=120)  # fmt: skip
    assert sim.returncode == 0, sim.stderr[-2000:]
    assert json.loads((tmp_path / "sim" / "summary.json").read_text())["jobs"] == 5
