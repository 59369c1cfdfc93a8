"""Two protocols' RD-AUC tables side by side with the paper's, as Markdown.

``python -m clients.reproduction.compare BASE.json OTHER.json [--names today,paper-code]``
reads two ``rdauc.json`` files (:func:`clients.reproduction.rdauc.write_table`) and prints, per
metric and acquisition, the paper's cell, then each protocol's (mean ± Algorithm 1's sd over its
repetitions, and how many), and for ``nlml`` also OTHER's ``nlml_paper`` where it has one.
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

from clients.reproduction.rdauc import PAPER_SIMULATORS


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
        lines += [f"#### {metric.upper()}", "",
                  "| acquisition | source | " + " | ".join(columns) + " |",
                  "|---|---|" + "---|" * len(columns)]  # fmt: skip
        acquisitions = [a for a in other["metrics"][metric] if a != other.get("baseline")]
        for acq in acquisitions:
            rows = [("paper", base["metrics"][metric].get(acq, {}), "paper", "pm"),
                    (names[0], base["metrics"][metric].get(acq, {}), "ours", "sd"),
                    (names[1], other["metrics"][metric].get(acq, {}), "ours", "sd")]  # fmt: skip
            if metric == "nlml" and "nlml_paper" in other["metrics"]:
                code = other["metrics"]["nlml_paper"].get(acq, {})
                rows.append((f"{names[1]}, the code's NLML", code, "ours", "sd"))
            for i, (name, cells, source, spread) in enumerate(rows):
                values = [_cell(cells.get(c, {}).get(source), spread) for c in columns]
                lines.append(f"| {acq if i == 0 else ''} | {name} | " + " | ".join(values) + " |")
        lines.append("")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m clients.reproduction.compare",
                                     description=__doc__.splitlines()[0])  # fmt: skip
    parser.add_argument("base", type=Path, help="an rdauc.json")
    parser.add_argument("other", type=Path, help="another rdauc.json")
    parser.add_argument("--names", default="base,other", help="the two protocols' names")
    args = parser.parse_args(argv)
    names = tuple(args.names.split(",", 1)) if "," in args.names else ("base", "other")
    base, other = (json.loads(p.read_text(encoding="utf-8")) for p in (args.base, args.other))
    print(side_by_side(base, other, names))


if __name__ == "__main__":
    main()
