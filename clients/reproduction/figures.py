"""Figures behind the reproduction's notes, computed from benchmark results files.

``python -m clients.reproduction.figures RESULTS.jsonl [MORE.jsonl ...] [--runs 0,1]`` prints,
for the finished runs of each file (``clients.reproduction.results.finished``), four Markdown
tables:

- **mode share**: on one simulator, the share of models fitted on at least ``--after`` labels
  whose RMSE is above ``--rmse-above`` (on Gramacy & Lee, a mode GP in the long-lengthscale
  mode of the posterior has an RMSE far above one in the short-lengthscale mode);
- **face share**: the share of the points each acquisition chose (the initial design left out)
  that lie within ``--face`` of the range of a face of the input box;
- **repeat share**: the share of the chosen points that had been labeled before in the run
  (possible only in campaigns with ``allow_repeats``: ``fbgp-al bench --allow-repeats``);
- **R-hat share**: the share of models whose largest R-hat is above ``--rhat-above``.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterable
from pathlib import Path

import numpy as np

from fbgp_al.clients.reproduction.results import finished, labeled_points, read_results, run_key
from fbgp_al.clients.simulators import get_simulator

Share = tuple[int, int]  # (how many of them, out of how many)


def mode_share(
    records: Iterable[dict], simulator: str, after: int, rmse_above: float
) -> dict[str, Share]:
    """``{acquisition: (models with rmse > rmse_above, models)}`` over the models of
    ``simulator`` fitted on ``after`` labels or more."""
    out: dict[str, list[int]] = {}
    for r in records:
        if r["simulator"] == simulator and r["n_labeled"] >= after:
            counts = out.setdefault(r["acquisition"], [0, 0])
            counts[0] += float(r["rmse"]) > rmse_above
            counts[1] += 1
    return {acq: (a, n) for acq, (a, n) in out.items()}


def _chosen(records: list[dict]):
    """``(simulator, acquisition, initial design, chosen points)`` of each run: the first
    record's points are the initial design, the later records' the acquisition's choices."""
    for sim, acq, run in sorted({run_key(r) for r in records}):
        X, _ = labeled_points(records, sim, acq, run)
        first = min(
            (r for r in records if run_key(r) == (sim, acq, run)), key=lambda r: r["n_labeled"]
        )
        k = len(first.get("x") or [])
        yield sim, acq, X[:k], X[k:]


def _add(out: dict, key, hits: int, total: int) -> None:
    counts = out.setdefault(key, [0, 0])
    counts[0] += hits
    counts[1] += total


def face_share(records: list[dict], face: float) -> dict[tuple[str, str], Share]:
    """``{(simulator, acquisition): (chosen points near a face, chosen points)}``: a point is
    near a face when one of its inputs is within ``face`` times that input's range of its
    lower or upper bound. The first record of each run (the initial design) is left out."""
    out: dict[tuple[str, str], list[int]] = {}
    for sim, acq, _, chosen in _chosen(records):
        if not len(chosen):
            continue
        s = get_simulator(sim)
        width = s.upper - s.lower
        near = np.minimum(chosen - s.lower, s.upper - chosen) <= face * width
        _add(out, (sim, acq), int(near.any(axis=1).sum()), len(chosen))
    return {key: (a, n) for key, (a, n) in out.items()}


def repeat_share(records: list[dict]) -> dict[tuple[str, str], Share]:
    """``{(simulator, acquisition): (chosen points labeled before in their run, chosen
    points)}``; "before" includes the initial design."""
    out: dict[tuple[str, str], list[int]] = {}
    for sim, acq, initial, chosen in _chosen(records):
        if not len(chosen):
            continue
        seen, repeats = {tuple(p) for p in initial}, 0
        for point in map(tuple, chosen):
            repeats += point in seen
            seen.add(point)
        _add(out, (sim, acq), repeats, len(chosen))
    return {key: (a, n) for key, (a, n) in out.items()}


def rhat_share(records: Iterable[dict], rhat_above: float) -> dict[str, Share]:
    """``{simulator: (models with max R-hat > rhat_above, models with an R-hat)}``."""
    out: dict[str, list[int]] = {}
    for r in records:
        if r.get("max_rhat") is not None:
            counts = out.setdefault(r["simulator"], [0, 0])
            counts[0] += float(r["max_rhat"]) > rhat_above
            counts[1] += 1
    return {sim: (a, n) for sim, (a, n) in out.items()}


def _percent(share: Share | None) -> str:
    if share is None or not share[1]:
        return ""
    return f"{100 * share[0] / share[1]:.0f} % of {share[1]}"


def _table(rows: dict[str, dict[str, Share]], first: str) -> str:
    columns = sorted({c for row in rows.values() for c in row})
    lines = [f"| {first} | " + " | ".join(columns) + " |", "|---" * (len(columns) + 1) + "|"]
    for name, row in rows.items():
        lines.append(f"| {name} | " + " | ".join(_percent(row.get(c)) for c in columns) + " |")
    return "\n".join(lines)


def report(path: Path, args) -> str:
    records, _ = finished(read_results(path))
    if args.runs is not None:
        records = [r for r in records if r["run"] in args.runs]
    runs = sorted({r["run"] for r in records})
    by_sim: dict[str, dict[str, Share]] = {}
    for (sim, acq), share in face_share(records, args.face).items():
        by_sim.setdefault(sim, {})[acq] = share
    repeats: dict[str, dict[str, Share]] = {}
    for (sim, acq), share in repeat_share(records).items():
        repeats.setdefault(sim, {})[acq] = share
    rhat = rhat_share(records, args.rhat_above)
    modes = mode_share(records, args.simulator, args.after, args.rmse_above)
    return "\n\n".join(
        [
            f"## {path} (finished runs, repetitions {', '.join(map(str, runs))})",
            f"Models of {args.simulator} on {args.after}+ labels with RMSE above "
            f"{args.rmse_above}:",
            _table({"share": modes}, "acquisition")
            if modes
            else f"(no models of {args.simulator} on {args.after}+ labels)",
            f"Chosen points within {100 * args.face:g} % of a face of the box:",
            _table(by_sim, "simulator"),
            "Chosen points that had been labeled before in their run:",
            _table(repeats, "simulator"),
            f"Models with max R-hat above {args.rhat_above}:",
            _table({"share": rhat}, "simulator"),
        ]
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m fbgp_al.clients.reproduction.figures",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("results", type=Path, nargs="+", help="results files (JSON lines)")
    parser.add_argument(
        "--runs",
        type=lambda s: {int(v) for v in s.split(",")},
        help="only these repetitions, comma-separated (default: all)",
    )
    parser.add_argument("--simulator", default="gramacy1d", help="for the mode share")
    parser.add_argument("--after", type=int, default=30, help="for the mode share: labels")
    parser.add_argument("--rmse-above", type=float, default=0.2, help="for the mode share")
    parser.add_argument("--face", type=float, default=0.02, help="for the face share")
    parser.add_argument("--rhat-above", type=float, default=1.1, help="for the R-hat share")
    args = parser.parse_args(argv)
    print("\n\n".join(report(path, args) for path in args.results))


if __name__ == "__main__":
    main()
