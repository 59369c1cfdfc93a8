"""How far RD-AUC cells over a few repetitions lie from the same cells over all of them.

``python -m clients.reproduction.subsets RESULTS [--size 3] [--points P] [--sds S]`` reads a
results file (finished runs only). For every simulator with more than ``--size`` repetitions it
cuts them into consecutive groups of ``--size`` (runs 0-2, 3-5, ...; a short last group is left
out), computes each group's RD-AUC cells (every acquisition but the baseline), and compares
each with the same cell over all the simulator's repetitions. It prints, per metric, the
differences in points and in the group cell's own sd (Algorithm 1's), and how many exceed
``--points`` and ``--sds``. Use it to judge a cell that has only ``--size`` repetitions
(Ishigami's 3 in ``docs/reproduction/paper-code``) against what such cells do where more ran.
"""

from __future__ import annotations

import argparse
import statistics
from pathlib import Path

import numpy as np

from fbgp_al.clients.reproduction.rdauc import BOUNDED, rd_auc_curves
from fbgp_al.clients.reproduction.results import Curves, finished, learning_curves, read_results
from fbgp_al.worker.vocabulary.defaults import BASELINE


def _only(curves: dict[str, Curves], runs: list[int]) -> dict[str, Curves]:
    out = {}
    for acq, c in curves.items():
        keep = np.isin(c.runs, runs)
        out[acq] = Curves(c.n_labeled, c.values[keep], c.runs[keep])
    return out


def subset_cells(records: list[dict], metric: str, size: int = 3) -> list[dict]:
    """Every (simulator, acquisition, group) cell: ``full`` and ``group`` RD-AUC (fractions),
    the group's ``sd`` and ``diff = group - full``; ``runs``: the group's repetitions."""
    out = []
    for sim, curves in sorted(learning_curves(records, metric).items()):
        runs = sorted(int(r) for r in curves[BASELINE].runs)
        if len(runs) <= size:
            continue
        full = rd_auc_curves(curves, BOUNDED[metric])
        for start in range(0, len(runs) - size + 1, size):
            group = runs[start : start + size]
            cells = rd_auc_curves(_only(curves, group), BOUNDED[metric])
            for acq, cell in cells.items():
                if acq == BASELINE:
                    continue
                out.append(
                    {
                        "simulator": sim,
                        "acquisition": acq,
                        "runs": group,
                        "full": full[acq].mean,
                        "group": cell.mean,
                        "sd": cell.sd,
                        "diff": cell.mean - full[acq].mean,
                    }
                )
    return out


def describe(cells: list[dict], points: float, sds: float) -> str:
    """One line: how many cells, their median differences, and how many exceed the limits."""
    if not cells:
        return "no simulator has more repetitions than a group"
    diff = [abs(c["diff"]) * 100 for c in cells]
    in_sd = [abs(c["diff"]) / c["sd"] if c["sd"] > 0 else float("inf") for c in cells]
    n = len(cells)
    over_points = sum(d > points for d in diff)
    over_sds = sum(z > sds for z in in_sd)
    return (
        f"{n} group cells: |group - all| median {statistics.median(diff):.1f} points, "
        f"{statistics.median(in_sd):.2f} of the group's sd; > {points:g} points: "
        f"{over_points} ({over_points / n:.0%}); > {sds:g} sd: {over_sds} "
        f"({over_sds / n:.0%})"
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m fbgp_al.clients.reproduction.subsets", description=__doc__.splitlines()[0]
    )
    parser.add_argument("results", type=Path, help="a results.jsonl")
    parser.add_argument("--size", type=int, default=3, help="repetitions per group")
    parser.add_argument("--points", type=float, default=20.0, help="a difference in points")
    parser.add_argument("--sds", type=float, default=2.0, help="a difference in group sds")
    args = parser.parse_args(argv)
    if args.size < 2:
        parser.error("--size must be at least 2 (a group of one has no sd)")
    if not args.results.is_file():
        parser.error(f"no results file {args.results}")
    records, _ = finished(read_results(args.results))
    for metric in BOUNDED:
        if any(metric in r for r in records):
            cells = subset_cells(records, metric, args.size)
            print(f"{metric}: {describe(cells, args.points, args.sds)}")


if __name__ == "__main__":
    main()
