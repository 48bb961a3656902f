"""``python -m gclab.report DIR [DIR ...] [--out DIR] [--target ACC]``: tables and plots."""

from __future__ import annotations

import argparse
import math
from pathlib import Path

from gclab.report import BANDS, SweepError, load_sweep, write_report


def _accuracy(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not 0 < value <= 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not an accuracy in (0, 1]")
    return value


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
        help="series label (e.g. uncoded) that speed-ups in the time-to-target table are "
        "measured against, seed by seed, at the same loss setting and other overrides",
    )  # fmt: skip
    args = parser.parse_args(argv)
    if args.out is None and len(args.dirs) > 1:
        parser.exit(
            2, "gclab.report: error: several folders given; say where to write: --out DIR\n"
        )
    if args.baseline is not None and args.target is None:
        parser.exit(2, "gclab.report: error: --baseline compares times to target; give --target\n")
    try:
        sweep = load_sweep(*args.dirs)
    except SweepError as exc:
        parser.exit(2, f"gclab.report: error: {exc}\n")
    labels = sorted({sweep.series(run) for run in sweep.runs})
    if args.baseline is not None and args.baseline not in labels:
        parser.exit(
            2,
            f"gclab.report: error: --baseline {args.baseline!r} is none of the runs' series: "
            f"{', '.join(map(repr, labels))}\n",
        )
    out = args.out or args.dirs[0]
    written = write_report(sweep, out, args.target, args.band, args.baseline)
    failed = sum(run.failed for run in sweep.runs)
    print((out / "summary.md").read_text(encoding="utf-8"))
    runs = f"{len(sweep.runs)} run" + ("s" if len(sweep.runs) != 1 else "")
    print(f"{runs} ({failed} failed); wrote:")
    for path in written:
        print(f"  {path}")


if __name__ == "__main__":
    main()
