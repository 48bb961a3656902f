"""Every committed study spec matches its committed archive: a dry run finds every real
and verification run there, so the documents' rebuild commands train nothing."""

from __future__ import annotations

import csv
import re
from pathlib import Path

import pytest
import yaml

from gclab.study.__main__ import main
from gclab.study.archive import archive_path, restore_run
from gclab.study.runner import StudyRunner
from gclab.study.spec import load_spec

ROOT = Path(__file__).resolve().parents[2]
STUDIES = {  # spec -> the archive its report is rebuilt from (docs/study.md)
    "packet_loss.yaml": "docs/study-results/archive",
    "packet_loss_v2.yaml": "docs/study-results/v2/archive",
    "packet_loss_v2_heldout.yaml": "docs/study-results/v2/heldout/archive",
    "packet_loss_v2_sgc.yaml": "docs/study-results/v2/sgc/archive",
    "packet_loss_v3.yaml": "docs/study-results/v3/archive",
    "packet_loss_v3_heldout.yaml": "docs/study-results/v3/heldout/archive",
    "packet_loss_v3_in_turn.yaml": "docs/study-results/v3/in-turn/archive",
    "packet_loss_v3_tcp.yaml": "docs/study-results/v3/tcp/archive",
    "packet_loss_v3_tcp_timelines.yaml": "docs/study-results/v3/tcp/archive",  # the same runs
}
#: Studies still running: their archive holds some of their runs, and nothing else.
RUNNING: set[str] = set()


def test_every_committed_spec_is_listed():
    assert {p.name for p in (ROOT / "gclab/study").glob("*.yaml")} == set(STUDIES)


@pytest.mark.parametrize("spec", sorted(STUDIES))
def test_the_archive_holds_every_run_of_the_spec(tmp_path, capsys, spec):
    out = tmp_path / "study"
    argv = ["--spec", str(ROOT / "gclab/study" / spec), "--out", str(out),
            "--archive", str(ROOT / STUDIES[spec]), "--dry-run"]  # fmt: skip
    assert main(argv) == 0
    text = capsys.readouterr().out
    counts = re.search(r"(\d+) real runs, \d+ replays, (\d+) verification runs(, (\d+))?", text)
    real, verify, corners = int(counts[1]), int(counts[2]), int(counts[4] or 0)
    restore = re.search(r"0 finished in \S+, (\d+) to restore", text)
    restore = int(restore.group(1)) if restore else 0
    archived = list((ROOT / STUDIES[spec]).rglob("*.tar.xz"))
    assert restore == len(archived)  # every archived run is one of the spec's
    assert real > 0 and (spec in RUNNING or restore == real + verify + corners)
    assert not out.exists()  # a dry run writes nothing


def test_v3s_held_out_spec_is_v3s_but_its_seeds_and_map():
    load = lambda name: yaml.safe_load((ROOT / "gclab/study" / name).read_text())  # noqa: E731
    study, held = load("packet_loss_v3.yaml"), load("packet_loss_v3_heldout.yaml")
    assert held.pop("seeds") == [5] and 5 not in study.pop("seeds")
    study.pop("map")
    assert held == study


def test_v3s_in_turn_spec_is_v3s_in_turn_arms_on_more_seeds_with_v3s_own_runs():
    load = lambda name: yaml.safe_load((ROOT / "gclab/study" / name).read_text())  # noqa: E731
    study, more = load("packet_loss_v3.yaml"), load("packet_loss_v3_in_turn.yaml")
    arms = ["classic_fr_x2", "sr_sgc_x2", "m_sgc_x2"]
    assert more["schemes"] == {arm: study["schemes"][arm] for arm in arms}
    assert more["losses"] == {"bernoulli-0.1": study["losses"]["bernoulli-0.1"]}
    assert more.pop("report") == {**study.pop("report"), "baseline": "classic_fr_x2"}
    for key in ("experiment", "overrides", "regime", "shortcut", "order"):
        assert more[key] == study[key]
    assert set(study["seeds"]) | {5} < set(more["seeds"])
    v3 = ROOT / "docs/study-results/v3"
    for arm in arms:  # seeds 0-5 are v3's own runs, byte for byte
        for seed in range(6):
            unit = Path("runs", arm, "bernoulli-0.1", f"seed{seed}.tar.xz")
            origin = v3 / ("heldout/archive" if seed == 5 else "archive") / unit
            assert (v3 / "in-turn/archive" / unit).read_bytes() == origin.read_bytes()


def test_v3s_tcp_spec_replays_v3s_exact_arms_own_lossless_runs_under_tcp_loss():
    load = lambda name: yaml.safe_load((ROOT / "gclab/study" / name).read_text())  # noqa: E731
    study, tcp = load("packet_loss_v3.yaml"), load("packet_loss_v3_tcp.yaml")
    arms = ["classic_fr", "classic_fr_aa", "uncoded"]  # v3's exact arms with lossless runs
    assert tcp["schemes"] == {arm: study["schemes"][arm] for arm in arms}
    assert tcp["losses"].pop("none") == study["losses"]["none"]
    assert all(keys[:2] == ["delay=tcp_loss", f"delay.ip_loss={name[4:]}"]
               for name, keys in tcp["losses"].items())  # fmt: skip
    assert tcp["shortcut"] and not study["shortcut"]  # every lossy cell an exact replay
    for key in ("experiment", "overrides", "regime", "seeds", "aa", "lossless"):
        assert tcp[key] == study[key]
    v3 = ROOT / "docs/study-results/v3"
    archived = sorted((v3 / "tcp/archive").rglob("*.tar.xz"))
    assert len(archived) == 15  # v3's own lossless runs, byte for byte
    for path in archived:
        unit = path.relative_to(v3 / "tcp/archive")
        assert path.read_bytes() == (v3 / "archive" / unit).read_bytes()


def test_v3s_tcp_spec_under_the_timeline_fit_is_the_tcp_spec_but_its_losses_parameters():
    load = lambda name: yaml.safe_load((ROOT / "gclab/study" / name).read_text())  # noqa: E731
    tcp, timelines = load("packet_loss_v3_tcp.yaml"), load("packet_loss_v3_tcp_timelines.yaml")
    old, new = tcp.pop("losses"), timelines.pop("losses")
    assert timelines == tcp and old.keys() == new.keys() and new["none"] == old["none"]
    for name in ("tcp-0.02", "tcp-0.05"):
        assert new[name][:2] == old[name][:2] and new[name] != old[name]
        keys = {k.split("=")[0] for k in new[name][2:]}  # every parameter written out
        assert keys == {
            f"delay.{p}"
            for p in (
                "tail",
                "copy_tail",
                "timeout",
                "resend",
                "fast_seconds",
                "fast_frames",
                "streams",
                "nodes",
                "chains",
            )
        }


def test_a_baseline_named_by_its_label_is_compared_under_its_groups_name(tmp_path):
    """The in-turn spec names its baseline by label (classic_fr_x2); the report names the
    group by its scheme (classic_fr): the runner translates, so every arm has its ratio."""
    spec = load_spec(ROOT / "gclab/study/packet_loss_v3_in_turn.yaml")
    archive = ROOT / STUDIES["packet_loss_v3_in_turn.yaml"] / "runs"
    for arm in spec.schemes:
        for seed in (0, 1):
            unit = f"{arm}/bernoulli-0.1/seed{seed}"
            restore_run(archive_path(archive, unit), tmp_path / "runs" / unit)
    StudyRunner(spec, tmp_path, log=lambda _: None).write_report()
    with (tmp_path / "report/time_to_target.csv").open(newline="") as f:
        rows = {row["series"]: row for row in csv.DictReader(f)}
    assert set(rows) == {"classic_fr", "sr_sgc", "m_sgc"}
    assert all(row["pairs"] == "2" for row in rows.values())
