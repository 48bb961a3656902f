"""``python -m gclab.report <sweep_dir> [--out DIR]``: tables and plots of a Hydra sweep."""

from __future__ import annotations

import argparse
from pathlib import Path

from gclab.report import SweepError, load_sweep, write_report


def main(argv: list[str] | None = None) -> None:
    """Parse the command line, report the sweep, and print the table and the files written."""
    parser = argparse.ArgumentParser(
        prog="python -m gclab.report",
        description="Summarise a Hydra sweep of gclab runs (training or simulator): "
        "summary.csv, summary.md and PNG plots.",
    )
    parser.add_argument(
        "sweep_dir", type=Path, help="the sweep folder, e.g. multirun/<date>/<time>"
    )
    parser.add_argument(
        "--out", type=Path, help="folder for the outputs (default: the sweep folder)"
    )
    args = parser.parse_args(argv)
    try:
        sweep = load_sweep(args.sweep_dir)
    except SweepError as exc:
        parser.exit(2, f"gclab.report: error: {exc}\n")
    written = write_report(sweep, args.out or args.sweep_dir)
    failed = sum(run.failed for run in sweep.runs)
    print((written[0].parent / "summary.md").read_text(encoding="utf-8"))
    runs = f"{len(sweep.runs)} run" + ("s" if len(sweep.runs) != 1 else "")
    print(f"{runs} ({failed} failed); wrote:")
    for path in written:
        print(f"  {path}")


if __name__ == "__main__":
    main()
