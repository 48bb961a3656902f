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
from typing import Any

import numpy as np
from omegaconf import OmegaConf

from gclab.errors import ConfigError
from gclab.report import AAPair, Sweep, SweepError, load_sweep, write_report
from gclab.report.groups import check_aa, groups
from gclab.report.runs import error_line
from gclab.study import regime_map
from gclab.study.archive import archive_path, archive_run, restore_run
from gclab.study.replay import ReplayError, replay_run, retime_run
from gclab.study.spec import StudySpec, Unit, compose_run, rto_of, run_overrides, variants
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
        """The run directory of a real run, a verification run or a map corner's run
        (``kind`` run, verify or map), and its archive file."""
        folder = {"verify": "verify", "map": "map"}.get(kind)
        run_dir = (self.out / folder / "runs" if folder else self.runs) / unit.name
        if self.archive is None:
            return run_dir, None
        return run_dir, archive_path(self.archive / (folder or "runs"), unit.name)

    def state(self, unit: Unit, kind: str = "run") -> str | None:
        """``finished`` (in the study folder), ``archived`` (to be restored) or None."""
        run_dir, archived = self._places(unit, kind)
        if (run_dir / "summary.json").is_file():
            return "finished"
        return "archived" if archived is not None and archived.is_file() else None

    def sync_archive(self, units: list[Unit], checks: list[Unit], corners: list[Unit] = ()) -> None:
        """Restore the archived runs this study folder has not finished; archive the
        finished runs the archive lacks. Call it before :meth:`run` or a report."""
        real = [(u, "run") for u in units if not u.replay] + [(u, "verify") for u in checks]
        real += [(u, "map") for u in corners]
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

    def run(self, units: list[Unit], checks: list[Unit], corners: list[Unit] = ()) -> list[Outcome]:
        """Every unit in order, the verification runs once the replays are written (before
        the real runs under loss), the map's corners last, then the report, the
        verification tables and the regime map."""
        self.out.mkdir(parents=True, exist_ok=True)
        # checks are replayed points (plan() refuses others), so they follow the last replay
        last_replay = max((i for i, unit in enumerate(units) if unit.replay), default=-1)
        for i, unit in enumerate(units):
            outcome = self.replay(unit) if unit.replay else self.train(unit)
            self.record(outcome)
            if i == last_replay:
                self._verify(checks)
        for corner in corners:
            self.record(self.train(corner, "map"))
        self.write_report()
        self.write_verification(checks)
        self.write_map()
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
        compute = self.partition_compute()
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
                self.spec.report.charge_server_time, self.spec.report.normalise == "all",
            )  # fmt: skip
        except ReplayError as exc:
            self.record(Outcome(unit, kind, "failed", time.monotonic() - start, str(exc)))

    def _report(self, runs: Path, out: Path) -> list[Path]:
        """``python -m gclab.report runs --out out`` with the spec's options, the baseline
        and the A/A arms named as the report names their groups. An A/A pair missing from
        the runs (a study part-way) leaves its floor unmeasured: every comparison is then
        not distinguishable, and the log says why."""
        options = self.spec.report
        sweep = load_sweep(runs)
        names = self._group_names(sweep, runs)
        pair = options.aa or (
            [names[label] for label in self.spec.aa] if set(self.spec.aa) <= set(names) else []
        )
        aa = AAPair(*pair, options.aa_at) if pair else None
        if aa is not None:
            try:
                check_aa(groups(sweep, options.smooth), aa)
            except SweepError as exc:
                self.log(f"report {out}: the A/A floor is unmeasured: {exc}")
        baseline = names.get(options.baseline, options.baseline)
        return write_report(
            sweep, out, options.target, options.band, baseline, options.horizon, aa,
            options.smooth,
        )  # fmt: skip

    def _group_names(self, sweep: Sweep, runs: Path) -> dict[str, str]:
        """The report's group name of each scheme label's runs, found by where they live
        (``runs/<label>/...``): a spec names its baseline and A/A arms by label."""
        names: dict[str, str] = {}
        for group in groups(sweep, self.spec.report.smooth):
            for run in group.runs:
                names.setdefault(run.path.relative_to(runs).parts[0], group.name)
        return names

    def partition_compute(self) -> float | None:
        """The normalised clock's seconds per partition gradient (``report.partition_compute``):
        as given, the regime's pre-registered value, or the median of the finished runs'
        recorded ``partition_seconds``."""
        compute = self.spec.report.partition_compute
        if compute == "regime":
            return self.spec.regime.partition_seconds
        if compute != "median":
            return compute
        recorded = []
        for summary_file in self.runs.glob("*/*/*/summary.json"):
            summary = json.loads(summary_file.read_text(encoding="utf-8"))
            if summary.get("partition_seconds") and not summary.get("replayed_from"):
                recorded.append(summary["partition_seconds"])
        return float(np.median(recorded)) if recorded else None

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
        compute = self.partition_compute()
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

    # --- the regime map ------------------------------------------------------------------

    def write_map(self) -> list[Path]:
        """The regime map of the finished runs in ``map/`` (:mod:`gclab.study.regime_map`):
        ``regime_map.csv``, ``regime_map.md``, ``regime_map.png`` and, with real corners,
        ``verify.md``. Nothing without a ``map`` section or before the baselines ran."""
        grid = self.spec.map
        if grid is None or not self.runs.is_dir():
            return []
        cells = self._map_cells()
        baselines = {v: base for base, others in grid.baselines.items() for v in others}
        rows = regime_map.compare_cells(cells, baselines, invalid=not self._valid())
        if not rows:
            return []
        root = self.out / "map"
        root.mkdir(parents=True, exist_ok=True)
        losses = list(grid.losses)
        regime_map.write_csv(rows, root / "regime_map.csv")
        (root / "regime_map.md").write_text(
            regime_map.markdown(rows, grid.rhos, losses), encoding="utf-8"
        )
        written = [root / "regime_map.csv", root / "regime_map.md"]
        figure = regime_map.heat_maps(rows, grid.rhos, losses, root / "regime_map.png")
        written += [figure] if figure else []
        checked = self._map_verification(cells)
        if checked:
            (root / "verify.md").write_text(checked, encoding="utf-8")
            written.append(root / "verify.md")
        return written

    def _map_cells(self) -> list[regime_map.Cell]:
        """Every mapped variant's cell per seed, ρ and loss, from the study's runs."""
        grid, target = self.spec.map, self.spec.report.target
        c0 = self.spec.regime.partition_seconds
        named = {v for base, others in grid.baselines.items() for v in (base, *others)}
        rtos = {rho: rto_of(self.spec, rho) for rho in grid.rhos}  # one composition each
        delays = {loss: compose_run(self.spec, keys).delay for loss, keys in grid.losses.items()}
        cells = []
        for variant in [v.label for v in variants(self.spec) if v.label in named]:
            for seed in self.spec.seeds:
                for loss, delay_cfg in delays.items():
                    source, delay = self._map_source(variant, loss, delay_cfg, seed)
                    for rho, rto in rtos.items():
                        outcome = None
                        if source is not None:
                            outcome = regime_map.cell_outcome(source, target, rto, c0, delay)
                        cells.append(regime_map.Cell(variant, rho, loss, seed, outcome))
        return cells

    def _map_source(
        self, variant: str, loss: str, delay: Any, seed: int
    ) -> tuple[Path | None, Any]:
        """The run a cell comes from and the delay model (``delay``, the map's loss setting)
        to replay it under (None: keep the run's): the real run at the map's loss where the
        study has one with the same delay model, else the lossless run of an exact variant,
        replayed."""
        same = self.runs / variant / loss / f"seed{seed}"
        if (same / "summary.json").is_file():
            ran = OmegaConf.load(same / ".hydra" / "config.yaml").delay
            if OmegaConf.to_container(ran) == OmegaConf.to_container(delay):
                return same, None
        lossless = self.runs / variant / self.spec.lossless / f"seed{seed}"
        if (lossless / "summary.json").is_file():
            return lossless, delay  # cell_outcome refuses it where the variant is stale
        return None, None

    def _map_verification(self, cells: list[regime_map.Cell]) -> str:
        """The corners' real runs against the map's cells of their seeds, as a table."""
        grid, target = self.spec.map, self.spec.report.target
        mapped = {(c.variant, c.rho, c.loss, c.seed): c.outcome for c in cells}
        pairs = []
        for corner in grid.verify:
            for seed in corner.seeds:
                real_dir = (
                    self.out
                    / "map"
                    / "runs"
                    / f"{corner.run}/rho{corner.rho:g}/{corner.loss}/seed{seed}"
                )
                if not (real_dir / "summary.json").is_file():
                    continue
                rto = rto_of(self.spec, corner.rho)
                c0 = self.spec.regime.partition_seconds
                real = regime_map.cell_outcome(real_dir, target, rto, c0)
                pairs.append((corner.run, corner.rho, corner.loss, seed, real,
                              mapped.get((corner.run, corner.rho, corner.loss, seed))))  # fmt: skip
        rows = regime_map.verify_rows(pairs)
        if not rows:
            return ""
        header = "| variant | compute per round / rto | loss | real / map (95 % interval) | seeds |"
        lines = [header, "|---|---|---|---|---|"]
        for variant, rho, loss, ratio, count in rows:
            shown = "–" if ratio is None else (
                f"{ratio.mean:.3f} ({ratio.low:.3f}–{ratio.high:.3f})" if ratio.count > 1
                else f"{ratio.mean:.3f}"
            )  # fmt: skip
            lines.append(f"| {variant} | {rho:g} | {loss} | {shown} | {count} |")
        return "\n".join(lines) + "\n"

    def _valid(self) -> bool:
        """Whether the study's A/A control holds on the normalised clock's report (or the
        measured one's without it), as written in its ``time_to_target.csv``."""
        for report in (self.out / "normalised" / "report", self.out / "report"):
            table = report / "aa_control.md"
            if table.is_file():
                return "fails" not in table.read_text(encoding="utf-8")
        return True
