"""``python -m gclab.study [--spec FILE] [--set KEY=VALUE ...] [--out DIR] [--archive DIR]
[--only GLOB ...]``.

Runs every unit the spec implies (:mod:`gclab.study.spec`) resumably into ``--out``
(:mod:`gclab.study.runner`), verifies the replay shortcut against real runs, and writes
the report. ``--archive DIR`` keeps every finished real run's results in DIR
(:mod:`gclab.study.archive`) and first restores from there the runs ``--out`` lacks, so
a committed archive carries the study from one machine to the next. ``--only GLOB``
(repeatable) runs only the units whose names match, e.g. the points a reader waits for
first; the report still covers every finished run. ``--dry-run`` lists
the units and the commands without running anything; ``--report-only`` starts no
training run: it writes the replays of the lossless runs that have finished, then the
verification tables and the report, from what is there.
Exit code 2 for a bad spec or bad folders (before anything runs or is written), 1 if some
unit failed.
"""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path

from gclab.errors import ConfigError
from gclab.study.archive import SUFFIX
from gclab.study.runner import StudyRunner
from gclab.study.spec import PACKET_LOSS, load_spec, map_units, plan, run_overrides, select


def _refusal(out: Path, archive: Path | None, report_only: bool) -> str | None:
    """Why the folders cannot serve, in one sentence, or None: ``out`` must be a folder or
    not exist yet, ``archive`` too, and ``report_only`` (which trains nothing) needs a
    finished run in ``out`` or in the archive."""
    if out.exists() and not out.is_dir():
        return f"--out {out} is a file, not a study folder; name a folder (it may not exist yet)."
    if archive is not None and archive.exists() and not archive.is_dir():
        return f"--archive {archive} is a file, not a folder of run archives."
    if not report_only or any((out / "runs").glob("*/*/*/summary.json")):
        return None
    if archive is None:
        return (
            f"--report-only has nothing to report: {out} holds no finished run; give the "
            "--archive to restore runs from, or run the study."
        )
    if not archive.is_dir():
        return (
            f"--archive {archive} does not exist and {out} holds no finished run, so "
            "--report-only has nothing to report; check the path."
        )
    if not any((archive / "runs").rglob("*" + SUFFIX)):
        return f"--report-only has nothing to report: neither {out} nor {archive} holds a run."
    return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m gclab.study",
        description="Run a study (default: the packet-loss study of docs/study.md) resumably, "
        "verify its replay shortcut against real runs, and report it.",
    )
    parser.add_argument("--spec", type=Path, help=f"study spec YAML (default: {PACKET_LOSS.name})")
    parser.add_argument(
        "--set", dest="sets", action="append", default=[], metavar="KEY=VALUE",
        help="change one spec key, e.g. --set seeds=[0] --set 'overrides=[data.root=/data/c10]'",
    )  # fmt: skip
    parser.add_argument("--out", type=Path, help="study folder (default: studies/<spec name>)")
    parser.add_argument(
        "--archive", type=Path,
        help="folder of run archives: restore the finished runs from it, archive new ones",
    )  # fmt: skip
    parser.add_argument(
        "--only", action="append", default=[], metavar="GLOB",
        help="run only the units named like this (<variant>/<loss>/seed<k>; repeatable), "
        "e.g. --only 'pipelined_fr-stale-*/bernoulli-0.2/*'",
    )  # fmt: skip
    parser.add_argument("--dry-run", action="store_true", help="list the units, run nothing")
    parser.add_argument(
        "--report-only", action="store_true",
        help="train nothing: replay the finished runs, rewrite the verification and the report",
    )  # fmt: skip
    args = parser.parse_args(argv)
    try:
        spec = load_spec(args.spec, args.sets)
        units, checks = plan(spec)
        corners = map_units(spec)
        chosen, chosen_checks = select(units, [*checks, *corners], args.only)
        chosen_corners = [u for u in chosen_checks if u in corners]
        chosen_checks = [u for u in chosen_checks if u not in corners]
    except ConfigError as exc:
        print(f"gclab.study: error: {exc}", file=sys.stderr)
        return 2
    out = args.out or Path("studies") / (args.spec or PACKET_LOSS).stem
    refusal = _refusal(out, args.archive, args.report_only)
    if refusal is not None:
        print(f"gclab.study: error: {refusal}", file=sys.stderr)
        return 2
    runner = StudyRunner(spec, out, archive=args.archive)
    if args.dry_run:
        done = {"finished": 0, "archived": 0}
        listed = [*((u, "run") for u in chosen), *((u, "verify") for u in chosen_checks),
                  *((u, "map") for u in chosen_corners)]  # fmt: skip
        for unit, kind in listed:
            command = "python -m gclab " + shlex.join(run_overrides(spec, unit.overrides))
            what = f"replay of {unit.source}" if unit.replay else command
            state = None if unit.replay else runner.state(unit, kind)
            if state:
                done[state] += 1
            print(f"{unit.name}: {what}" + (f"  [{state}]" if state else ""))
        real = sum(not u.replay for u in chosen)
        print(
            f"{real} real runs, {len(chosen) - real} replays, {len(chosen_checks)} "
            f"verification runs, {len(chosen_corners)} map corners"
        )
        if any(done.values()):
            print(f"not to train: {done['finished']} finished in {out}, "
                  f"{done['archived']} to restore from {args.archive}")  # fmt: skip
        return 0
    try:
        runner.sync_archive(units, checks, corners)
    except ConfigError as exc:  # a damaged archive
        print(f"gclab.study: error: {exc}", file=sys.stderr)
        return 2
    if args.report_only:
        runner.replay_finished(units)
        written = runner.write_report()
        runner.write_verification(checks)
        written += runner.write_map()
    else:
        runner.run(chosen, chosen_checks, chosen_corners)
        written = [out / "report" / "summary.md"]
    for path in written:
        print(f"  {path}")
    return 1 if any(o.state == "failed" for o in runner.outcomes) else 0


if __name__ == "__main__":
    sys.exit(main())
