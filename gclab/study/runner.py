"""Running a study resumably: real runs as ``python -m gclab`` subprocesses, replays in
this process, the shortcut's verification, then the report.

Layout of the study folder::

    runs/<variant>/<loss>/seed<k>/      every run of the study (real or replayed), as
                                        Hydra run directories: the report reads them all
    verify/runs/<variant>/<loss>/seed<k>/  real runs of replayed points
    verify/comparison.md, verify/*.csv  the replays against those real runs
    report/                             python -m gclab.report on runs/
    normalised/runs/, normalised/report/  with ``report.partition_compute``: every run
                                        re-timed to that compute speed, and its report
    normalised/verify/                  the verification on that clock
    status.csv                          every unit: done / failed / skipped, seconds, why

With an archive folder (:mod:`gclab.study.archive`), ``runs/<unit>`` and
``verify/runs/<unit>`` of every real run are kept there as
``runs/<unit>.tar.xz`` and ``verify/<unit>.tar.xz``: archived runs the study folder lacks
are restored before anything runs, and each run is archived as it finishes.

Running it again continues: a run with ``summary.json`` is done and skipped; one with a
``checkpoint.pt`` is resumed (``resume=true``; every scheme resumes); a failed run is
tried again. A run that fails is recorded in
``status.csv`` and the study goes on; replays of it are skipped. Replays are cheap and
always redone, so they follow a source that was run again.
"""

from __future__ import annotations

import csv
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from gclab.errors import ConfigError
from gclab.report import AAPair, SweepError, load_sweep, write_report
from gclab.report.groups import check_aa, groups
from gclab.report.runs import error_line
from gclab.study.archive import archive_path, archive_run, restore_run
from gclab.study.replay import ReplayError, replay_run, retime_run
from gclab.study.spec import StudySpec, Unit, compose_run, run_overrides
from gclab.study.verify import Comparison, compare, markdown, write_rows
from gclab.tracking.artifacts import atomic_write


@dataclass(frozen=True)
class Outcome:
    """What happened to one unit in this invocation."""

    name: str
    kind: str  # run, replay, verify, retime or verify-retime
    state: str  # done, failed or skipped
    seconds: float
    message: str = ""


class StudyRunner:
    """Runs a study's units into ``out``, one at a time, and writes ``status.csv``."""

    def __init__(
        self,
        spec: StudySpec,
        out: Path,
        log: Callable[[str], None] = print,
        archive: Path | None = None,
    ) -> None:
        self.spec = spec
        self.out = out
        self.runs = out / "runs"
        self.log = log
        self.archive = archive
        self.outcomes: list[Outcome] = []

    # --- the archive -------------------------------------------------------------------------

    def _places(self, unit: Unit, kind: str) -> tuple[Path, Path | None]:
        """The run directory of a real run or verification run, and its archive file."""
        verify = kind == "verify"
        run_dir = (self.out / "verify" / "runs" if verify else self.runs) / unit.name
        if self.archive is None:
            return run_dir, None
        return run_dir, archive_path(self.archive / ("verify" if verify else "runs"), unit.name)

    def state(self, unit: Unit, kind: str = "run") -> str | None:
        """``finished`` (in the study folder), ``archived`` (to be restored) or None."""
        run_dir, archived = self._places(unit, kind)
        if (run_dir / "summary.json").is_file():
            return "finished"
        return "archived" if archived is not None and archived.is_file() else None

    def sync_archive(self, units: list[Unit], checks: list[Unit]) -> None:
        """Restore the archived runs this study folder has not finished; archive the
        finished runs the archive lacks. Call it before :meth:`run` or a report."""
        real = [(u, "run") for u in units if not u.replay] + [(u, "verify") for u in checks]
        for unit, kind in real:
            run_dir, archived = self._places(unit, kind)
            if archived is None:
                return
            finished = (run_dir / "summary.json").is_file()
            if archived.is_file() and not finished:
                restore_run(archived, run_dir)
                self.log(f"restored {kind} {unit.name} from {archived}")
            elif finished and not archived.is_file():
                archive_run(run_dir, archived)
                self.log(f"archived {kind} {unit.name} in {archived}")

    # --- real runs -----------------------------------------------------------------------

    def _launch(self, unit: Unit, run_dir: Path, resume: bool) -> int:
        """``python -m gclab`` for the unit; console output goes to ``console.log``."""
        command = [
            sys.executable, "-m", "gclab", *run_overrides(self.spec, unit.overrides),
            *(["resume=true"] if resume else []), f"hydra.run.dir={run_dir}",
        ]  # fmt: skip
        env = {**os.environ, "TQDM_MININTERVAL": "60"}  # a progress line a minute, not a flood
        run_dir.mkdir(parents=True, exist_ok=True)
        with (run_dir / "console.log").open("a", encoding="utf-8") as console:
            console.write(" ".join(command) + "\n")
            console.flush()
            return subprocess.run(
                command, stdout=console, stderr=subprocess.STDOUT, env=env
            ).returncode

    def train(self, unit: Unit, kind: str = "run") -> Outcome:
        """Run ``unit`` for real (a study run, or a ``verify`` run of a replayed point) unless
        it is done; resume from a checkpoint; archive it once it finishes."""
        start = time.monotonic()
        run_dir, archived = self._places(unit, kind)
        if (run_dir / "summary.json").is_file():
            return Outcome(unit.name, kind, "done", 0.0, "finished earlier")
        resume = (run_dir / "checkpoint.pt").is_file()
        if not resume and run_dir.exists():
            shutil.rmtree(run_dir)  # a failed or barely started run: start afresh
        code = self._launch(unit, run_dir, resume)
        note = "resumed" if resume else ""
        seconds = time.monotonic() - start
        if (run_dir / "summary.json").is_file():
            if archived is not None:
                archive_run(run_dir, archived)
            return Outcome(unit.name, kind, "done", seconds, note)
        reason = error_line(run_dir) or f"python -m gclab exited with code {code}"
        return Outcome(unit.name, kind, "failed", seconds, reason)

    # --- replays ---------------------------------------------------------------------------

    def replay(self, unit: Unit) -> Outcome:
        """Replay ``unit.source`` under the unit's loss setting into ``runs/<unit>``."""
        start = time.monotonic()
        source = self.runs / unit.source
        if not (source / "summary.json").is_file():
            return Outcome(unit.name, "replay", "skipped", 0.0, f"{unit.source} has not finished")
        cfg = compose_run(self.spec, unit.overrides)
        choices = {
            k: v for k, v in cfg.hydra.runtime.choices.items()
            if v is not None and not k.startswith("hydra/")
        }  # fmt: skip
        try:
            replay_run(source, cfg, self.runs / unit.name, list(cfg.hydra.overrides.task), choices)
        except (ReplayError, ConfigError) as exc:  # e.g. a bad value in the loss setting
            return Outcome(unit.name, "replay", "failed", time.monotonic() - start, str(exc))
        return Outcome(unit.name, "replay", "done", time.monotonic() - start)

    def replay_finished(self, units: list[Unit]) -> None:
        """Every replay whose source run has finished (the others are left out, unrecorded)."""
        self.out.mkdir(parents=True, exist_ok=True)
        for unit in units:
            if unit.replay and (self.runs / unit.source / "summary.json").is_file():
                self.record(self.replay(unit))

    # --- the study ---------------------------------------------------------------------------

    def record(self, outcome: Outcome) -> None:
        self.outcomes.append(outcome)
        note = f" ({outcome.message})" if outcome.message else ""
        self.log(f"[{len(self.outcomes)}] {outcome.kind} {outcome.name}: {outcome.state}"
                 f" in {outcome.seconds:.0f} s{note}")  # fmt: skip
        rows = [(o.name, o.kind, o.state, f"{o.seconds:.1f}", o.message) for o in self.outcomes]

        def write(tmp: Path) -> None:
            with tmp.open("w", newline="", encoding="utf-8") as f:
                writer = csv.writer(f)
                writer.writerow(("unit", "kind", "state", "seconds", "message"))
                writer.writerows(rows)

        atomic_write(self.out / "status.csv", write)

    def run(self, units: list[Unit], checks: list[Unit]) -> list[Outcome]:
        """Every unit in order, the verification runs once the replays are written (before
        the real runs under loss), then the report and the verification tables."""
        self.out.mkdir(parents=True, exist_ok=True)
        # checks are replayed points (plan() refuses others), so they follow the last replay
        last_replay = max((i for i, unit in enumerate(units) if unit.replay), default=-1)
        for i, unit in enumerate(units):
            outcome = self.replay(unit) if unit.replay else self.train(unit)
            self.record(outcome)
            if i == last_replay:
                self._verify(checks)
        self.write_report()
        self.write_verification(checks)
        return self.outcomes

    def _verify(self, checks: list[Unit]) -> None:
        for check in checks:
            self.record(self.train(check, "verify"))

    def write_verification(self, checks: list[Unit]) -> list[Comparison]:
        """``verify/comparison.md`` and one CSV per point whose real run and replay exist;
        with ``report.partition_compute``, the same on the normalised clock in
        ``normalised/verify/`` (each real run re-timed like the study's runs, so a
        verification run made on another machine than its lossless source compares the
        clocks' rules, not the machines' speeds). Call it after :meth:`write_report`, which
        writes the normalised replays."""
        done = self._compare(checks, self.out / "verify", self.runs)
        compute = self.spec.report.partition_compute
        if compute is not None:
            root = self.out / "normalised" / "verify"
            shutil.rmtree(root, ignore_errors=True)  # all derived: no stale check survives
            for check in checks:
                real = self.out / "verify" / "runs" / check.name
                if (real / "summary.json").is_file():
                    self._retime(real, root / "runs" / check.name, check.name, compute,
                                 kind="verify-retime")  # fmt: skip
            self._compare(checks, root, self.out / "normalised" / "runs")
        return done

    def _compare(self, checks: list[Unit], verify: Path, runs: Path) -> list[Comparison]:
        done = []
        for check in checks:
            real, replay = verify / "runs" / check.name, runs / check.name
            if (real / "summary.json").is_file() and (replay / "summary.json").is_file():
                comparison = compare(check.name, real, replay, self.spec.report.target)
                write_rows(comparison, verify / (check.name.replace("/", "_") + ".csv"))
                done.append(comparison)
        if done:
            (verify / "comparison.md").write_text(markdown(done), encoding="utf-8")
        return done

    def _retime(
        self, source: Path, dest: Path, unit: str, compute: float, kind: str = "retime"
    ) -> None:
        """``source`` re-timed into ``dest`` at ``compute`` s per partition gradient; a
        run that cannot be re-timed is recorded as failed (as ``kind``)."""
        summary = json.loads((source / "summary.json").read_text(encoding="utf-8"))
        start = time.monotonic()
        try:
            retime_run(
                source, dest, compute * summary["load"] * summary["n"],
                self.spec.report.charge_server_time,
            )  # fmt: skip
        except ReplayError as exc:
            self.record(Outcome(unit, kind, "failed", time.monotonic() - start, str(exc)))

    def _report(self, runs: Path, out: Path) -> list[Path]:
        """``python -m gclab.report runs --out out`` with the spec's options. An A/A pair
        missing from the runs (a study part-way) leaves its floor unmeasured: every
        comparison is then not distinguishable, and the log says why."""
        options = self.spec.report
        sweep = load_sweep(runs)
        aa = AAPair(*options.aa, options.aa_at) if options.aa else None
        if aa is not None:
            try:
                check_aa(groups(sweep, options.smooth), aa)
            except SweepError as exc:
                self.log(f"report {out}: the A/A floor is unmeasured: {exc}")
        return write_report(
            sweep, out, options.target, options.band, options.baseline, options.horizon, aa,
            options.smooth,
        )  # fmt: skip

    def write_report(self) -> list[Path]:
        """The report of ``runs/`` in ``report/`` (:meth:`_report`), and the same on the
        normalised clock (:meth:`write_normalised`)."""
        if not self.runs.is_dir():
            return []
        return self._report(self.runs, self.out / "report") + self.write_normalised()

    def write_normalised(self) -> list[Path]:
        """Every finished run re-timed into ``normalised/runs/`` with ``partition_compute``
        seconds per partition gradient (the median compute time of a worker-round becomes
        that times the partitions a worker computes per round, ``load·n``), and its report
        in ``normalised/report/``. A run that cannot be re-timed is recorded as failed."""
        compute = self.spec.report.partition_compute
        if compute is None:
            return []
        root = self.out / "normalised"
        shutil.rmtree(root / "runs", ignore_errors=True)
        for summary_file in sorted(self.runs.glob("*/*/*/summary.json")):
            unit = summary_file.parent.relative_to(self.runs).as_posix()
            self._retime(summary_file.parent, root / "runs" / unit, unit, compute)
        if not (root / "runs").is_dir():
            return []
        return self._report(root / "runs", root / "report")
