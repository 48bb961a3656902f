"""Worst relative decode error with float32 payloads, ours vs Tandon's random H (same run).

For each (n, s): contiguous, spread and random straggler sets (a different seed from the
one the stride search uses, so the numbers are out of sample); partial gradients are
float32 N(0, 1), encoded by each worker's encoder, decoded by the scheme's decoder, and
compared with the float64 sum of the same float32 partials. Prints a Markdown table, then
(full mode) the worst error of the default constructions over *every* s the goal covers:
s <= n/4 for n <= 64 and s <= 15 for n = 256.

    python bench/decode_accuracy.py [--quick]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from gclab.coding.cce import CCECR
from gclab.coding.classic import ClassicCR, ClassicFR
from gclab.coding.contract import Task
from gclab.coding.evaluation import straggler_patterns
from gclab.coding.linear import LinearScheme
from gclab.coding.sums import combine
from gclab.errors import ConfigError, DecodeError


def worst_error(scheme: LinearScheme, length: int, randoms: int) -> tuple[float, int]:
    """(worst relative error over the straggler sets, sets the residual check rejected).

    A rejected set is still measured, decoding with the rejected weights, so the table
    shows how far off the gradient would have been.
    """
    n = scheme.n
    grads = np.random.default_rng(7).standard_normal((n, length)).astype(np.float32)
    truth = grads.astype(np.float64).sum(axis=0)
    packets = [
        scheme.encoder(w).encode(0, {Task(0, j): grads[j] for j in scheme.placement[w]})
        for w in range(n)
    ]
    worst, rejected = 0.0, 0
    for round, stragglers in enumerate(straggler_patterns(n, scheme.s, randoms, seed=2024)):
        decoder = scheme.decoder(length)
        survivors = tuple(w for w in range(n) if w not in stragglers)
        for w in survivors:
            decoder.receive(round, w, packets[w])
        try:
            got = decoder.decode(round)
        except DecodeError:
            rejected += 1
            weights = scheme.decoding_weights(survivors)
            got = combine([packets[w] for w in survivors], weights, length)
        worst = max(worst, float(np.linalg.norm(got - truth) / np.linalg.norm(truth)))
    return worst, rejected


def cell(make, n: int, s: int, length: int, randoms: int) -> str:
    """The table entry: worst error, with ``(k rejected)`` when the residual check fired."""
    try:
        scheme = make(n, s)
    except ConfigError:
        return "—"
    worst, rejected = worst_error(scheme, length, randoms)
    return f"{worst:.1e}" + (f" ({rejected} rejected)" if rejected else "")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="n <= 64, fewer sets (< 1 min)")
    args = parser.parse_args()
    sizes = (16, 64) if args.quick else (16, 64, 256)
    randoms, length = (8, 512) if args.quick else (24, 2048)
    columns = {
        "classic_cr (rotation)": lambda n, s: ClassicCR(n, s),
        "cce_cr m=2 (rotation)": lambda n, s: CCECR(n, s, 2),
        "classic_cr (real nodes)": lambda n, s: ClassicCR(n, s, "real"),
        "cce_cr m=2 (real nodes)": lambda n, s: CCECR(n, s, 2, "real"),
        "Tandon random H, seed 0": lambda n, s: ClassicCR(n, s, "tandon", seed=0),
        "Tandon random H, seed 1": lambda n, s: ClassicCR(n, s, "tandon", seed=1),
        "classic_fr": lambda n, s: ClassicFR(n, s),
    }
    start = time.perf_counter()
    print(f"float32 payloads, l={length}, worst of contiguous/spread/{randoms} random sets\n")
    print("| n | s | " + " | ".join(columns) + " |")
    print("|---|---|" + "---|" * len(columns))
    for n in sizes:
        for s in (1, 3, 7, 15):
            row = [cell(make, n, s, length, randoms) for make in columns.values()]
            print(f"| {n} | {s} | " + " | ".join(row) + " |", flush=True)
    print(f"\n({time.perf_counter() - start:.0f} s; rejected = sets whose weights failed the")
    print("residual check, so the decoder raised DecodeError; the error shown is what")
    print("decoding with those weights anyway would have given)")
    if not args.quick:
        every_s(columns, length, randoms)


def every_s(columns: dict, length: int, randoms: int) -> None:
    """Worst error over every s of the goal, for the default (rotation) constructions."""
    start = time.perf_counter()
    goals = {16: range(1, 5), 64: range(1, 17), 256: range(1, 16)}
    defaults = list(columns)[:2]
    print("\nworst over every s of the goal (s <= n/4 for n <= 64, s <= 15 at n = 256)\n")
    print("| n | s | " + " | ".join(f"{c}: worst (at s)" for c in defaults) + " |")
    print("|---|---|" + "---|" * len(defaults))
    for n, svals in goals.items():
        cells = []
        for name in defaults:
            errors = {
                s: worst_error(columns[name](n, s), length, randoms)[0] for s in svals if s + 2 <= n
            }
            worst = max(errors, key=errors.get)
            cells.append(f"{errors[worst]:.1e} (s={worst})")
        print(f"| {n} | {svals.start}..{svals.stop - 1} | " + " | ".join(cells) + " |", flush=True)
    print(f"\n({time.perf_counter() - start:.0f} s)")


if __name__ == "__main__":
    main()
