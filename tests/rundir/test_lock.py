"""The run directory's lock (gclab/rundir/lock.py), what a refusal leaves of it, and the
keys a resume may change (gclab/rundir/guard.py): fast, in this process and one holder
process."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from contextlib import nullcontext
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from gclab.app import run
from gclab.errors import REFUSED, ConfigError
from gclab.rundir import lock
from gclab.rundir.guard import WHERE_KEYS, RunDirGuard
from gclab.rundir.lock import LOCK_FILE, DirectoryInUse, held, release, released, take
from helpers.config import TINY, compose_config, hydra_config
from helpers.inprocess import in_process

#: Holds the lock of argv[1] until killed.
HOLDER = """
import sys, time
from pathlib import Path
from gclab.rundir.lock import take
take(Path(sys.argv[1]), "it")
print("held", flush=True)
time.sleep(600)
"""


def refuse() -> None:
    raise ConfigError("no")


def test_a_held_directory_is_refused_naming_its_holder_and_a_dead_holders_lock_is_taken(
    tmp_path: Path,
) -> None:
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(tmp_path)], stdout=subprocess.PIPE, text=True
    )
    assert holder.stdout.readline() == "held\n"
    checked = []
    with pytest.raises(DirectoryInUse) as info:
        take(tmp_path, "hydra.run.dir=x", lambda: checked.append(1))
    assert str(info.value) == (
        f"hydra.run.dir=x is in use by another gclab process (pid {holder.pid} on host "
        f"{socket.gethostname()}); wait for it to end or choose another directory."
    )
    assert not checked  # refused before its check
    os.kill(holder.pid, signal.SIGKILL)
    holder.wait()
    assert (tmp_path / LOCK_FILE).read_text().split()[0] == str(holder.pid)  # left behind
    take(tmp_path, "it")  # the OS released the dead holder's lock
    assert (tmp_path / LOCK_FILE).read_text() == f"{os.getpid()} {socket.gethostname()}\n"
    take(tmp_path, "it")  # re-entrant in one process
    release(tmp_path)
    release(tmp_path)
    assert (tmp_path / LOCK_FILE).read_text() == ""


def test_a_holder_that_exited_counts_as_dead_before_its_parent_reaps_it() -> None:
    child = subprocess.Popen(["true"])
    os.waitid(os.P_PID, child.pid, os.WEXITED | os.WNOWAIT)  # exited, left a zombie
    assert not lock.pid_alive(child.pid)
    child.wait()
    assert not lock.pid_alive(child.pid)
    assert lock.pid_alive(os.getpid())


def test_a_refused_check_releases_the_lock_and_leaves_its_file_alone(tmp_path: Path) -> None:
    (tmp_path / LOCK_FILE).write_text("")
    with pytest.raises(ConfigError, match="no"):
        take(tmp_path, "it", refuse)
    assert (tmp_path / LOCK_FILE).read_text() == ""
    take(tmp_path, "it")  # not held any more
    release(tmp_path)


@pytest.mark.parametrize("before", [None, "", "123 elsewhere\n"], ids=["no-file", "empty", "dead"])
def test_a_refusal_in_the_body_leaves_the_lock_file_as_it_was_found(
    tmp_path: Path, before: str | None
) -> None:
    directory = tmp_path / "made" / "run"
    if before is not None:
        directory.mkdir(parents=True)
        (directory / LOCK_FILE).write_text(before)
    with pytest.raises(ConfigError, match="no"), held(directory, "it"):
        take(directory, "it")  # re-entrant: the inner release is not the last
        assert (directory / LOCK_FILE).read_text().startswith(f"{os.getpid()} ")
        release(directory)
        refuse()
    if before is None:
        assert not (tmp_path / "made").exists()  # the folders it made, nothing else there
    else:
        assert (directory / LOCK_FILE).read_text() == before
    take(directory, "it")  # let go: not held any more
    release(directory)


def test_a_refusal_keeps_folders_others_wrote_into(tmp_path: Path) -> None:
    directory = tmp_path / "run"
    with pytest.raises(ConfigError), held(directory, "it"):
        (directory / "error.txt").write_text("no\n")  # as Hydra's record would be
        refuse()
    assert sorted(p.name for p in directory.iterdir()) == ["error.txt"]


def test_a_bug_or_a_normal_end_empties_the_lock_file(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError), held(tmp_path, "it"):
        raise RuntimeError("a bug")
    assert (tmp_path / LOCK_FILE).read_text() == ""
    with held(tmp_path, "it"):
        pass
    assert (tmp_path / LOCK_FILE).read_text() == ""


@pytest.mark.parametrize(
    ("end", "left"),
    [(SystemExit(REFUSED), None), (SystemExit(130), ""), (SystemExit(0), ""), (None, "")],
    ids=["refused", "stopped", "exit-0", "returned"],
)
def test_the_end_of_a_process_lets_go_of_every_lock_it_still_holds(
    tmp_path: Path, end: SystemExit | None, left: str | None
) -> None:
    """A task function that ends the process skips the Hydra callback's release."""
    with pytest.raises(SystemExit) if end else nullcontext(), released():
        take(tmp_path / "a", "it")
        take(tmp_path / "a", "it")
        take(tmp_path / "b", "it")
        if end:
            raise end
    for name in "ab":
        lock_file = tmp_path / name / LOCK_FILE
        assert (lock_file.read_text() if lock_file.exists() else None) == left
    assert not lock._held


def test_a_lock_taken_through_a_file_its_holder_removed_is_taken_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Between opening the file and locking it, its refused holder may remove it."""
    flock, calls = lock.fcntl.flock, []

    def removed_first(handle, operation):
        if not calls:
            (tmp_path / LOCK_FILE).unlink()  # the holder refused and removed its file
        calls.append(handle)
        flock(handle, operation)

    monkeypatch.setattr(lock.fcntl, "flock", removed_first)
    take(tmp_path, "it")
    assert len(calls) == 2 and calls[0].closed
    assert (tmp_path / LOCK_FILE).read_text().startswith(f"{os.getpid()} ")
    release(tmp_path)


def test_where_keys_may_change_on_resume_and_the_segment_notes_them(tmp_path: Path) -> None:
    run(compose_config([*TINY, "train.checkpoint_every=2"]), tmp_path, start_pool=in_process)
    moved = ["cluster=ray", "cluster.address=10.0.0.1:6379", "cluster.actors=1",
             "cluster.timeout=30", "cluster.dashboard=true", "resume=true"]  # fmt: skip
    resumed = hydra_config([*TINY, "train.checkpoint_every=2", *moved], tmp_path)
    OmegaConf.set_readonly(resumed.hydra, True)  # as Hydra hands it to callbacks
    RunDirGuard.check_run(resumed)
    release(tmp_path)
    changed = OmegaConf.load(tmp_path / ".hydra-resume-1" / "changed.yaml")
    assert set(changed) == {
        "cluster.address", "cluster.actors", "cluster.timeout", "cluster.dashboard",
        "cluster.worker_cpus", "cluster.placement",  # cluster=ray's own defaults
    }  # fmt: skip
    assert set(changed) <= set(WHERE_KEYS)
    assert changed["cluster.address"] == {"run": None, "now": "10.0.0.1:6379"}
    for key in ("cluster.threads_per_actor=2", "cluster.bf16=true", "train.lr=0.1"):
        refused = hydra_config([*TINY, "train.checkpoint_every=2", key, "resume=true"], tmp_path)
        with pytest.raises(ConfigError, match=f"the config differs .*{key.split('=')[0]}"):
            RunDirGuard.check_run(refused)
