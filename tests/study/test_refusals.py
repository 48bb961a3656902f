"""``python -m gclab.study`` refuses folders it cannot use in one sentence, exit code 2,
before anything is written."""

from __future__ import annotations

from pathlib import Path

import pytest

from gclab.study.__main__ import main

SPEC = """
experiment: smoke
overrides: [cluster.workers=4, train.rounds=6, data.train_size=256, data.test_size=64]
seeds: [0]
schemes: {uncoded: [scheme=uncoded]}
losses: {none: [delay=none], lossy: [delay=bernoulli, delay.p=0.3]}
lossless: none
"""


def listing(root: Path) -> list[tuple[str, bytes]]:
    return sorted((p.relative_to(root).as_posix(), p.read_bytes() if p.is_file() else b"")
                  for p in root.rglob("*"))  # fmt: skip


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--out", "{tmp}/a_file"], "--out {tmp}/a_file is a file, not a study folder"),
        (["--out", "{tmp}/a_file", "--report-only"], "is a file, not a study folder"),
        (["--out", "{tmp}/study", "--archive", "{tmp}/a_file"],
         "--archive {tmp}/a_file is a file, not a folder of run archives"),
        (["--out", "{tmp}/study", "--archive", "{tmp}/missing", "--report-only"],
         "--archive {tmp}/missing does not exist and {tmp}/study holds no finished run"),
        (["--out", "{tmp}/study", "--report-only"],
         "--report-only has nothing to report: {tmp}/study holds no finished run"),
        (["--out", "{tmp}/study", "--archive", "{tmp}/empty", "--report-only"],
         "nothing to report: neither {tmp}/study nor {tmp}/empty holds a run"),
    ],
    ids=["out-is-a-file", "out-is-a-file-report-only", "archive-is-a-file",
         "archive-missing-report-only", "nothing-to-report", "empty-archive"],
)  # fmt: skip
def test_unusable_folders_are_refused_in_one_sentence_touching_nothing(
    tmp_path, capsys, args, message
):
    (tmp_path / "spec.yaml").write_text(SPEC)
    (tmp_path / "a_file").write_text("not a folder\n")
    (tmp_path / "empty").mkdir()
    before = listing(tmp_path)
    argv = [a.format(tmp=tmp_path) for a in args]
    assert main(["--spec", str(tmp_path / "spec.yaml"), *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith("gclab.study: error: ") and message.format(tmp=tmp_path) in err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert listing(tmp_path) == before  # nothing created, nothing changed
