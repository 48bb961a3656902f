"""Run archives: what they keep, that they round-trip byte for byte, and bad archives."""

from __future__ import annotations

import tarfile
from pathlib import Path

import pytest

from gclab.errors import ConfigError
from gclab.study.archive import OPTIONAL, REQUIRED, archive_path, archive_run, restore_run

FILES = {
    "summary.json": '{"test_accuracy": 0.61}\n',
    "metrics.jsonl": '{"kind": "round", "round": 0}\n{"kind": "eval", "round": 0}\n',
    ".hydra/config.yaml": "seed: 0\n",
    ".hydra/hydra.yaml": "hydra: {}\n",
    ".hydra/overrides.yaml": "- seed=0\n",
}


def make_run(path: Path, files: dict[str, str] = FILES) -> Path:
    for name, text in files.items():
        (path / name).parent.mkdir(parents=True, exist_ok=True)
        (path / name).write_text(text)
    (path / "checkpoint.pt").write_bytes(b"\0" * 4096)  # neither of these is archived
    (path / "console.log").write_text("python -m gclab ...\n")
    return path


def contents(path: Path) -> dict[str, str]:
    return {p.relative_to(path).as_posix(): p.read_text() for p in path.rglob("*") if p.is_file()}


def test_an_archive_keeps_the_result_files_and_restores_them_exactly(tmp_path: Path) -> None:
    run = make_run(tmp_path / "run")
    dest = archive_path(tmp_path / "archive", "classic_cr/none/seed0")
    assert dest == tmp_path / "archive" / "classic_cr" / "none" / "seed0.tar.xz"
    archive_run(run, dest)
    with tarfile.open(dest) as tar:
        assert sorted(tar.getnames()) == sorted([*REQUIRED, *OPTIONAL])
        assert {m.mtime for m in tar.getmembers()} == {0}
    first = dest.read_bytes()
    archive_run(run, dest)
    assert dest.read_bytes() == first  # reproducible: git sees no change when nothing changed

    restore_run(dest, tmp_path / "restored" / "seed0")
    assert contents(tmp_path / "restored" / "seed0") == FILES
    assert [p.name for p in (tmp_path / "restored").iterdir()] == ["seed0"]  # no staging left


def test_the_optional_hydra_files_may_be_missing(tmp_path: Path) -> None:
    required = {k: v for k, v in FILES.items() if k in REQUIRED}
    archive_run(make_run(tmp_path / "run", required), tmp_path / "a.tar.xz")
    restore_run(tmp_path / "a.tar.xz", tmp_path / "restored")
    assert contents(tmp_path / "restored") == required


def test_an_unfinished_run_cannot_be_archived(tmp_path: Path) -> None:
    run = make_run(tmp_path / "run")
    (run / "summary.json").unlink()
    with pytest.raises(ValueError, match=r"not a finished run: it has no summary\.json"):
        archive_run(run, tmp_path / "a.tar.xz")
    assert not (tmp_path / "a.tar.xz").exists()


def test_restoring_replaces_an_unfinished_run_of_the_unit(tmp_path: Path) -> None:
    archive_run(make_run(tmp_path / "run"), tmp_path / "a.tar.xz")
    unfinished = tmp_path / "study" / "seed0"
    (unfinished / ".hydra").mkdir(parents=True)
    (unfinished / "metrics.jsonl").write_text('{"kind": "round", "round": 0}\n')
    (unfinished / "checkpoint.pt").write_bytes(b"\1")
    restore_run(tmp_path / "a.tar.xz", unfinished)
    assert contents(unfinished) == FILES


def test_a_damaged_archive_fails_cleanly_and_leaves_the_run_directory_alone(
    tmp_path: Path,
) -> None:
    archive_run(make_run(tmp_path / "run"), tmp_path / "a.tar.xz")
    truncated = tmp_path / "truncated.tar.xz"
    truncated.write_bytes((tmp_path / "a.tar.xz").read_bytes()[:100])
    unfinished = tmp_path / "study" / "seed0"
    unfinished.mkdir(parents=True)
    (unfinished / "checkpoint.pt").write_bytes(b"\1")
    with pytest.raises(
        ConfigError, match=r"truncated\.tar\.xz cannot be read .*restore it from git"
    ):
        restore_run(truncated, unfinished)
    assert contents(unfinished) == {"checkpoint.pt": "\1"}
    assert sorted(p.name for p in (tmp_path / "study").iterdir()) == ["seed0"]

    partial = tmp_path / "partial.tar.xz"
    with tarfile.open(partial, "w:xz") as tar:
        tar.add(tmp_path / "run" / "summary.json", "summary.json")
    with pytest.raises(ConfigError, match=r"lacks metrics\.jsonl, \.hydra/config\.yaml"):
        restore_run(partial, unfinished)
    assert contents(unfinished) == {"checkpoint.pt": "\1"}


def test_an_archive_cannot_write_outside_the_run_directory(tmp_path: Path) -> None:
    evil = tmp_path / "evil.tar.xz"
    with tarfile.open(evil, "w:xz") as tar:
        for name in REQUIRED:
            tar.add(make_run(tmp_path / "run") / name, name)
        tar.add(tmp_path / "run" / "summary.json", "../escaped.json")
    restore_run(evil, tmp_path / "study" / "seed0")
    assert not (tmp_path / "study" / "escaped.json").exists()
    assert sorted(contents(tmp_path / "study" / "seed0")) == sorted(REQUIRED)
