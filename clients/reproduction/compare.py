"""Two protocols' RD-AUC tables side by side with the paper's, as Markdown.

``python -m clients.reproduction.compare BASE.json OTHER.json [--names today,paper-code]``
reads two ``rdauc.json`` files (:func:`clients.reproduction.rdauc.write_table`) and prints, per
metric and acquisition, the paper's cell, then each protocol's (mean ± Algorithm 1's sd over its
repetitions, and how many), and for ``nlml`` also OTHER's ``nlml_paper`` where it has one;
then, per source, how far its cells are from the paper's over the cells both protocols hold
(:func:`gaps`).
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
from pathlib import Path

from fbgp_al.clients.reproduction.rdauc import FAR, PAPER_SIMULATORS, cell_gaps


def _cell(cell: dict | None, spread: str) -> str:
    if not cell or cell.get("mean") is None:
        return ""
    text = f"{cell['mean']:.1f}"
    sd = cell.get(spread)
    if sd is not None and math.isfinite(sd):
        text += f" ± {sd:.1f}"
    if cell.get("runs") is not None:
        text += f" ({cell['runs']})"
    return text


def side_by_side(base: dict, other: dict, names: tuple[str, str] = ("base", "other")) -> str:
    """The Markdown tables (see the module's doc) of two ``rdauc.json`` contents."""
    columns = [c for c in other["columns"] if c in base["columns"] or c in PAPER_SIMULATORS]
    lines = []
    for metric in ("nlml", "rmse"):
        lines += [
            f"#### {metric.upper()}",
            "",
            "| acquisition | source | " + " | ".join(columns) + " |",
            "|---|---|" + "---|" * len(columns),
        ]
        acquisitions = [a for a in other["metrics"][metric] if a != other.get("baseline")]
        for acq in acquisitions:
            rows = [
                ("paper", base["metrics"][metric].get(acq, {}), "paper", "pm"),
                (names[0], base["metrics"][metric].get(acq, {}), "ours", "sd"),
                (names[1], other["metrics"][metric].get(acq, {}), "ours", "sd"),
            ]
            if metric == "nlml" and "nlml_paper" in other["metrics"]:
                code = other["metrics"]["nlml_paper"].get(acq, {})
                rows.append((f"{names[1]}, the code's NLML", code, "ours", "sd"))
            for i, (name, cells, source, spread) in enumerate(rows):
                values = [_cell(cells.get(c, {}).get(source), spread) for c in columns]
                lines.append(f"| {acq if i == 0 else ''} | {name} | " + " | ".join(values) + " |")
        lines.append("")
    return "\n".join(lines)


def _sources(base: dict, other: dict, names: tuple[str, str]) -> list[tuple[str, str, dict]]:
    """(source name, metric, per-acquisition cells) of each row :func:`gaps` reports."""
    rows = [
        (name, metric, table["metrics"][metric])
        for metric in ("nlml", "rmse")
        for name, table in zip(names, (base, other), strict=True)
    ]
    if "nlml_paper" in other["metrics"]:
        rows.insert(2, (f"{names[1]}, the code's NLML", "nlml", other["metrics"]["nlml_paper"]))
    return rows


def gaps(
    base: dict, other: dict, names: tuple[str, str] = ("base", "other"), k: float = FAR
) -> str:
    """A Markdown table: per source and metric, over the (acquisition, simulator) cells both
    protocols hold for the paper's simulators (the baseline left out), the mean absolute gap
    to the paper's cell in RD-AUC points and its median (which one heavy-tailed cell does not
    move), how many cells are more than ``k`` of the paper's ``±`` away, and how many are more
    than ``k`` away counting the source's own spread too (:func:`~clients.reproduction.rdauc.
    cell_gaps`; a one-repetition cell counts by the paper's ``±`` alone), and the median over
    those cells of the source's ``±`` over the paper's (both are Algorithm 1's, which shrinks
    as ``1 / sqrt(R)`` with the repetitions ``R``)."""
    baseline = other.get("baseline")
    cells = [
        (acq, sim)
        for acq in other["metrics"]["nlml"]
        if acq != baseline
        for sim in PAPER_SIMULATORS
        if all(
            _mean(t["metrics"]["nlml"].get(acq, {}).get(sim, {}).get("ours")) is not None
            for t in (base, other)
        )
    ]
    lines = [
        f"Over {len(cells)} cells ({len({a for a, _ in cells})} acquisitions x "
        f"{len({s for _, s in cells})} simulators) that both protocols ran:",
        "",
        "| source | metric | mean absolute gap | median absolute gap | "
        f"cells > {k:g} paper ± | cells > {k:g} joint ± | median ± / paper ± |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, metric, per_acq in _sources(base, other, names):
        diffs, ratios, far, joint_far = [], [], 0, 0
        for acq, sim in cells:
            cell = per_acq.get(acq, {}).get(sim, {})
            ours, paper = cell.get("ours") or {}, cell.get("paper") or {}
            if _mean(ours) is None or _mean(paper) is None:
                continue
            gap, joint = cell_gaps(ours["mean"], ours.get("sd"), paper["mean"], paper["pm"])
            diffs.append(abs(ours["mean"] - paper["mean"]))
            if not math.isnan(joint) and paper["pm"] > 0:
                ratios.append(ours["sd"] / paper["pm"])
            far += abs(gap) > k
            joint_far += abs(gap if math.isnan(joint) else joint) > k
        mean = f"{sum(diffs) / len(diffs):.1f}" if diffs else ""
        middle = f"{statistics.median(diffs):.1f}" if diffs else ""
        ratio = f"{statistics.median(ratios):.2f}" if ratios else ""
        lines.append(
            f"| {name} | {metric.upper()} | {mean} | {middle} | {far} | {joint_far} | {ratio} |"
        )
    return "\n".join(lines) + "\n"


def _mean(cell: dict | None) -> float | None:
    return None if not cell or cell.get("mean") is None else cell["mean"]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m fbgp_al.clients.reproduction.compare", description=__doc__.splitlines()[0]
    )
    parser.add_argument("base", type=Path, help="an rdauc.json")
    parser.add_argument("other", type=Path, help="another rdauc.json")
    parser.add_argument("--names", default="base,other", help="the two protocols' names")
    args = parser.parse_args(argv)
    names = tuple(args.names.split(",", 1)) if "," in args.names else ("base", "other")
    for path in (args.base, args.other):
        if not path.is_file():
            parser.error(f"no file {path} (an rdauc.json that fbgp-al bench writes)")
    base, other = (json.loads(p.read_text(encoding="utf-8")) for p in (args.base, args.other))
    print(side_by_side(base, other, names))
    print(gaps(base, other, names))


if __name__ == "__main__":
    main()
