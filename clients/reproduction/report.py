"""The benchmark's report from its results file: the RD-AUC table beside the paper's
(``rdauc.md``, ``rdauc.json``), learning curves (``learning_curves.png``) and ``summary.md``
(how it was run, which of the paper's claims held, which RD-AUC cells are far from the paper's,
the samplers' diagnostics)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from clients.reproduction.claims import Claim, check_claims, claims_markdown
from clients.reproduction.plots import plot_learning_curves
from clients.reproduction.rdauc import (
    FAR,
    far_from_paper,
    far_markdown,
    load_paper_table,
    summarize,
    write_table,
)
from clients.reproduction.results import finished, read_results, wall_seconds


def diagnostics_markdown(records: list[dict]) -> str:
    """One row per simulator: models scored, median and total refit seconds, the worst R-hat,
    the smallest ESS and the divergences summed over every model."""
    lines = ["| simulator | models | median refit s | total refit s | max R-hat | min ESS | "
             "divergences |", "|---|---|---|---|---|---|---|"]  # fmt: skip
    for sim in sorted({r["simulator"] for r in records}):
        rows = [r for r in records if r["simulator"] == sim]

        def column(name: str, rows=rows) -> np.ndarray:
            return np.array([float(r.get(name, np.nan)) for r in rows], dtype=float)

        refit = column("refit_seconds")
        lines.append(
            f"| {sim} | {len(rows)} | {np.nanmedian(refit):.2f} | {np.nansum(refit):.0f} | "
            f"{np.nanmax(column('max_rhat')):.3f} | {np.nanmin(column('min_ess')):.0f} | "
            f"{int(np.nansum(column('divergences')))} |"
        )
    return "\n".join(lines) + "\n"


def time_markdown(records: list[dict]) -> str:
    """What the runs so far cost: campaign time summed over campaigns, and wall time (with
    campaigns side by side counted once) where the records say when they ran."""
    hours = sum(float(r.get("seconds", 0.0)) for r in records) / 3600
    wall, timed = wall_seconds(records)
    workers = sorted({int(r["workers"]) for r in records if "workers" in r})
    on = f" on {' or '.join(map(str, workers))} worker(s)" if workers else ""
    text = (f"Time over every run so far (all invocations, in-progress runs included): "
            f"{hours:.2f} h of campaign time, summed over campaigns.")  # fmt: skip
    if timed:
        untimed = len(records) - timed
        text += (f" Wall time with at least one campaign running: {wall / 3600:.2f} h{on}, "
                 f"from the {timed} records that say when they ran"
                 + (f" ({untimed} older ones do not)" if untimed else "") + ".")  # fmt: skip
    return text + "\n"


def write_report(results_path: str | Path, out_dir: str | Path, header: str = "") -> list[Claim]:
    """Write the table, plots and ``summary.md`` into ``out_dir``; returns the claims checked.

    ``header``: Markdown put first in the summary (the command, settings and timing).
    """
    out_dir = Path(out_dir)
    everything = read_results(results_path)
    if not everything:
        raise ValueError(f"{results_path} holds no results")
    records, short = finished(everything)
    write_table(results_path, out_dir, records)
    plot_learning_curves(records, out_dir / "learning_curves.png")
    summary = summarize(records)
    claims = check_claims(summary)
    far = far_markdown(far_from_paper(summary, load_paper_table()))
    runs = {(r["simulator"], r["acquisition"], r["run"]) for r in records}
    left_out = ""
    if short:
        names = ", ".join(f"{s}/{a}/run{k}" for s, a, k in short)
        left_out = f"Left out of the tables and plots until they finish: {names}.\n"
    spent = time_markdown(everything)
    text = "\n".join([
        "# Benchmark summary", "", header.strip(), "", spent,
        f"{len(runs)} finished runs, {len(records)} scored models in "
        f"`{Path(results_path).name}`.", left_out,
        "## The paper's claims", "", claims_markdown(claims),
        "RD-AUC tables beside the paper's: `rdauc.md` (`rdauc.json`); learning curves: "
        "`learning_curves.png`.", "",
        f"## Cells more than {FAR:g} paper-sds from the paper", "", far,
        "## Sampler diagnostics", "", diagnostics_markdown(records),
    ])  # fmt: skip
    (out_dir / "summary.md").write_text(text, encoding="utf-8")
    return claims
