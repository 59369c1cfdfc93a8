"""The benchmark's report from its results file: the RD-AUC table beside the paper's
(``rdauc.md``, ``rdauc.json``), learning curves (``learning_curves.png``) and ``summary.md``
(how it was run, which of the paper's claims held, which RD-AUC cells are far from the paper's,
the runs whose NLML area one model holds, the samplers' diagnostics)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from fbgp_al.clients.reproduction.claims import Claim, check_claims, claims_markdown
from fbgp_al.clients.reproduction.plots import plot_learning_curves
from fbgp_al.clients.reproduction.rdauc import (
    FAR,
    far_from_paper,
    far_markdown,
    load_paper_table,
    summarize,
    write_table,
)
from fbgp_al.clients.reproduction.results import finished, read_results, run_key, wall_seconds

DOMINANT_SHARE = 0.5  # a run's area is one model's when that model holds this much of it


def diagnostics_markdown(records: list[dict]) -> str:
    """One row per simulator: models scored, median and total refit seconds, the worst R-hat,
    the smallest ESS and the divergences summed over every model."""
    lines = [
        "| simulator | models | median refit s | total refit s | max R-hat | min ESS | "
        "divergences |",
        "|---|---|---|---|---|---|---|",
    ]
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


def dominant_models(
    records: list[dict], metric: str = "nlml", share: float = DOMINANT_SHARE
) -> list[dict]:
    """The runs where one model holds at least ``share`` of the area under ``metric``'s curve
    (trapezoidal over ``n_labeled``, as RD-AUC's): a model's part of the area is its value times
    its trapezoid weight (half an interval at each end), and its share is that part over the
    sum of every model's part taken unsigned (a curve that crosses 0 has parts of both signs).
    The model's value is above 0. One dict per such run,
    ``{"simulator", "acquisition", "run", "n_labeled", "value", "nlpd_mixture", "area",
    "share"}`` (``nlpd_mixture``: the same model's mixture NLPD, None where not recorded),
    largest share first. A heavy-tailed metric (the mode GP's NLML early on) shows here: such a
    run's AUC, and any RD-AUC built on it, rides on one model."""
    by_run: dict[tuple, list[dict]] = {}
    for r in records:
        if r.get(metric) is not None:
            by_run.setdefault(run_key(r), []).append(r)
    out = []
    for (sim, acq, run), rows in by_run.items():
        rows = sorted(rows, key=lambda r: r["n_labeled"])
        if len(rows) < 2:
            continue
        x = np.array([r["n_labeled"] for r in rows], dtype=float)
        values = np.array([float(r[metric]) for r in rows])
        gaps = np.diff(x)
        weights = (np.concatenate([[0.0], gaps]) + np.concatenate([gaps, [0.0]])) / 2
        parts = weights * values
        area, unsigned = float(parts.sum()), float(np.abs(parts).sum())
        top = int(np.argmax(parts))
        if parts[top] > 0 and parts[top] >= share * unsigned:
            out.append(
                {
                    "simulator": sim,
                    "acquisition": acq,
                    "run": run,
                    "n_labeled": int(x[top]),
                    "value": float(values[top]),
                    "nlpd_mixture": rows[top].get("nlpd_mixture"),
                    "area": area,
                    "share": float(parts[top] / unsigned),
                }
            )
    return sorted(out, key=lambda d: -d["share"])


def dominant_markdown(records: list[dict], share: float = DOMINANT_SHARE) -> str:
    """:func:`dominant_models` for the NLML and the paper's code's NLML, as Markdown."""
    lines = []
    for metric, name in (("nlml", "NLML"), ("nlml_paper", "the code's NLML")):
        rows = dominant_models(records, metric, share)
        if not rows:
            continue
        lines += [
            "",
            f"{name}: {len(rows)} run(s)",
            "",
            "| simulator | acquisition | run | model (labels) | its value "
            "| its mixture NLPD | run's area | model's share |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for d in rows:
            nlpd = "" if d["nlpd_mixture"] is None else f"{d['nlpd_mixture']:.2f}"
            lines.append(
                f"| {d['simulator']} | {d['acquisition']} | {d['run']} | "
                f"{d['n_labeled']} | {d['value']:.1f} | {nlpd} | {d['area']:.1f} | "
                f"{d['share']:.0%} |"
            )
    if not lines:
        return f"No model holds {share:.0%} of its run's area.\n"
    head = (
        f"Runs where one model holds at least {share:.0%} of the area under the curve (its "
        "value times its trapezoid weight, over the sum of every model's taken unsigned), "
        "largest share first:"
    )
    return head + "\n" + "\n".join(lines) + "\n"


def time_markdown(records: list[dict]) -> str:
    """What the runs so far cost: campaign time summed over campaigns, and wall time (with
    campaigns side by side counted once) where the records say when they ran."""
    hours = sum(float(r.get("seconds", 0.0)) for r in records) / 3600
    wall, timed = wall_seconds(records)
    workers = sorted({int(r["workers"]) for r in records if "workers" in r})
    on = f" on {' or '.join(map(str, workers))} worker(s)" if workers else ""
    text = (
        f"Time over every run so far (all invocations, in-progress runs included): "
        f"{hours:.2f} h of campaign time, summed over campaigns."
    )
    if timed:
        untimed = len(records) - timed
        text += (
            f" Wall time with at least one campaign running: {wall / 3600:.2f} h{on}, "
            f"from the {timed} records that say when they ran"
            + (f" ({untimed} older ones do not)" if untimed else "")
            + "."
        )
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
    text = "\n".join(
        [
            "# Benchmark summary",
            "",
            header.strip(),
            "",
            spent,
            f"{len(runs)} finished runs, {len(records)} scored models in "
            f"`{Path(results_path).name}`.",
            left_out,
            "## The paper's claims",
            "",
            claims_markdown(claims),
            "RD-AUC tables beside the paper's: `rdauc.md` (`rdauc.json`); learning curves: "
            "`learning_curves.png`.",
            "",
            f"## Cells more than {FAR:g} paper-sds from the paper",
            "",
            far,
            "## Runs whose NLML area one model holds",
            "",
            dominant_markdown(records),
            "## Sampler diagnostics",
            "",
            diagnostics_markdown(records),
        ]
    )
    (out_dir / "summary.md").write_text(text, encoding="utf-8")
    return claims
