"""``python -m gclab.report DIR [DIR ...] [--out DIR] [--target ACC [--horizon S]
[--smooth K] [--baseline SERIES] [--aa GROUP_A GROUP_B [--aa-at SETTING]]]``: tables and
plots."""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable
from pathlib import Path

from gclab.report import BANDS, AAPair, SweepError, load_sweep, write_report
from gclab.report.groups import check_aa, groups, parse_setting


def _number(accept: Callable[[float], bool], what: str) -> Callable[[str], float]:
    """An argparse type: a float that ``accept`` admits, else one sentence naming ``what``."""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            value = math.nan
        if not accept(value):
            raise argparse.ArgumentTypeError(f"{text!r} is not {what}")
        return value

    return parse


_accuracy = _number(lambda value: 0 < value <= 1, "an accuracy in (0, 1]")
_seconds = _number(lambda value: 0 < value < math.inf, "a number of seconds > 0")


def _count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of evaluations >= 1")
    return value


def _setting(text: str) -> str:
    try:
        parse_setting(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a loss setting: DELAY or DELAY:RATE, e.g. none or bernoulli:0.1"
        ) from None
    return text


def main(argv: list[str] | None = None) -> None:
    """Parse the command line, report the runs, and print the tables and the files written."""
    parser = argparse.ArgumentParser(
        prog="python -m gclab.report",
        description="Summarise gclab runs (training or simulator): a Hydra sweep, single "
        "runs, or a study of many; summary.csv, summary.md and PNG plots. Runs that differ "
        "only by seed are drawn as one mean curve with a band.",
    )
    parser.add_argument(
        "dirs", type=Path, nargs="+", metavar="DIR",
        help="a sweep folder (multirun/<date>/<time>), a run's folder, or a folder of them",
    )  # fmt: skip
    parser.add_argument(
        "--out", type=Path, help="folder for the outputs (default: the one DIR given)"
    )
    parser.add_argument(
        "--target", type=_accuracy, metavar="ACC",
        help="test accuracy for the time-to-target table (time_to_target.csv, summary.md)",
    )  # fmt: skip
    parser.add_argument(
        "--band", choices=sorted(BANDS), default="ci",
        # argparse %-formats help texts: the band's "95 %" must be escaped
        help=f"band around mean curves: ci = {BANDS['ci']}, range = {BANDS['range']}".replace(
            "%", "%%"
        ),
    )  # fmt: skip
    parser.add_argument(
        "--baseline", metavar="SERIES",
        help="group (as the tables name it, e.g. classic_fr beside 'classic_fr, "
        "network.recovery=partial') or series label (e.g. uncoded) that the time-to-target "
        "table compares every group with, seed by seed, at the same loss setting and other "
        "overrides",
    )  # fmt: skip
    parser.add_argument(
        "--horizon", type=_seconds, metavar="S",
        help="horizon of the restricted mean time to target, in virtual seconds (default: per "
        "loss setting, the shortest budget, or end of a run that missed the target)",
    )  # fmt: skip
    parser.add_argument(
        "--smooth", type=_count, default=1, metavar="K",
        help="a run crosses the target where the mean of its last K evaluations first "
        "reaches it (default 1: its first evaluation at or above the target)",
    )  # fmt: skip
    parser.add_argument(
        "--aa", nargs=2, metavar=("GROUP_A", "GROUP_B"),
        help="an A/A pair: two groups that run the same algorithm as separate arms; their "
        "paired ratio sets the noise floor every comparison is judged against",
    )  # fmt: skip
    parser.add_argument(
        "--aa-at", type=_setting, metavar="SETTING",
        help="the loss setting(s) where the --aa pair is the same algorithm: DELAY or "
        "DELAY:RATE, e.g. none (default: wherever both ran)",
    )  # fmt: skip
    args = parser.parse_args(argv)
    if args.out is None and len(args.dirs) > 1:
        parser.exit(
            2, "gclab.report: error: several folders given; say where to write: --out DIR\n"
        )
    for option in ("baseline", "horizon", "aa"):
        if getattr(args, option) is not None and args.target is None:
            parser.exit(2, f"gclab.report: error: --{option} concerns times to target; give "
                        "--target\n")  # fmt: skip
    if args.smooth != 1 and args.target is None:
        parser.exit(2, "gclab.report: error: --smooth concerns times to target; give --target\n")
    if args.aa_at is not None and args.aa is None:
        parser.exit(2, "gclab.report: error: --aa-at places an A/A pair; give --aa\n")
    try:
        sweep = load_sweep(*args.dirs)
    except SweepError as exc:
        parser.exit(2, f"gclab.report: error: {exc}\n")
    labels = sorted({sweep.series(run) for run in sweep.runs})
    named = labels + [g.name for g in groups(sweep, args.smooth)] if args.baseline else labels
    if args.baseline is not None and args.baseline not in named:
        parser.exit(
            2,
            f"gclab.report: error: --baseline {args.baseline!r} is none of the runs' series: "
            f"{', '.join(map(repr, labels))}\n",
        )
    aa = AAPair(*args.aa, args.aa_at) if args.aa else None
    if aa is not None:
        try:
            check_aa(groups(sweep, args.smooth), aa)
        except SweepError as exc:
            parser.exit(2, f"gclab.report: error: {exc}\n")
    out = args.out or args.dirs[0]
    written = write_report(
        sweep, out, args.target, args.band, args.baseline, args.horizon, aa, args.smooth
    )
    failed = sum(run.failed for run in sweep.runs)
    print((out / "summary.md").read_text(encoding="utf-8"))
    runs = f"{len(sweep.runs)} run" + ("s" if len(sweep.runs) != 1 else "")
    print(f"{runs} ({failed} failed); wrote:")
    for path in written:
        print(f"  {path}")


if __name__ == "__main__":
    main()
