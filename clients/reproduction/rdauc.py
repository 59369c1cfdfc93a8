"""RD-AUC, the paper's summary of whole learning curves, and its Table 2 rendered beside ours.

RD-AUC (Riis et al. 2022, appendix "Mean and variance for the relative decrease in area under the
loss curve", Algorithm 1) compares an acquisition's learning curves with the baseline's (ALM):

    RD-AUC = (AUC_b - AUC_new) / (AUC_b - AUC_best)

positive when the new acquisition's curve lies below the baseline's (lower error is better).
``AUC_best`` is the area of the metric's lower bound: 0 for RMSE; for NLML, which has none, the
constant curve at the lowest value any acquisition reached on that simulator (any run, any step).
The paper prints its ratio as ``(AUC_new - AUC_b) / AUC_b`` but its algorithm and table use the
sign above (ALM 0, better acquisitions positive); we follow the algorithm.

Areas are trapezoidal over ``n_labeled`` (unit steps: one label per iteration).

``nlml_paper`` (the test NLML as the paper's code computes it, which records carry where the
service sends it) gets its own table, beside the paper's NLML figures: those are what the
paper's code computed. :func:`far_from_paper` lists the cells more than two of the paper's ``±``
away from the paper's value.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import numpy as np

from fbgp_al.clients.reproduction.results import METRICS, Curves, learning_curves, read_results
from fbgp_al.clients.simulators import SIMULATORS
from fbgp_al.worker.vocabulary.defaults import BASELINE, PAPER_ACQUISITIONS

# NLML has no lower bound, RMSE has 0
BOUNDED = {"nlml": False, "nlml_paper": False, "rmse": True}
# metrics that records may lack (the service did not send them): a table when any record has one
OPTIONAL_METRICS = ("nlml_paper",)
# the paper's Table 2 entry each metric is compared with
PAPER_METRIC = {"nlml": "nlml", "nlml_paper": "nlml", "rmse": "rmse"}
TITLES = {
    "nlml": "NLML",
    "rmse": "RMSE",
    "nlml_paper": "NLML as the paper's code computes it (noise counted twice)",
}
# how many of the paper's ± a cell may be away from the paper's value before it is listed
FAR = 2.0
PAPER_SIMULATORS = ("gramacy1d", "higdon", "gramacy2d", "branin", "ishigami", "hartmann6")


@dataclass(frozen=True)
class RdAuc:
    """Mean and variance of RD-AUC (fractions, not percent) from ``runs`` runs per acquisition."""

    mean: float
    variance: float
    runs: int

    @property
    def sd(self) -> float:
        return float(np.sqrt(self.variance)) if self.variance >= 0 else float("nan")


def auc(values, n_labeled=None) -> np.ndarray:
    """Trapezoidal area under learning curves: ``values`` ``[..., T]`` -> ``[...]``.

    ``n_labeled`` ``[T]`` is the x-axis (unit steps when omitted).
    """
    values = np.asarray(values, dtype=float)
    x = np.arange(values.shape[-1]) if n_labeled is None else np.asarray(n_labeled, dtype=float)
    # written out rather than np.trapezoid, which numpy < 2 (allowed by pyproject) lacks
    return ((values[..., 1:] + values[..., :-1]) * np.diff(x)).sum(-1) / 2


def rd_auc(auc_baseline, auc_new, auc_best: float = 0.0, ddof: int = 1) -> RdAuc:
    """Algorithm 1: mean and variance of RD-AUC from ``R`` AUCs of each acquisition.

    ``auc_baseline`` ``[R]``, ``auc_new`` ``[R]``: one AUC per run; ``auc_best``: the AUC of the
    metric's lower bound (see the module docstring). Every baseline run is paired with every new
    run, giving ``R^2`` numerators ``n = AUC_b - AUC_new`` and denominators ``d = AUC_b -
    AUC_best``. With ``mu_n, mu_d`` their means, ``s_n^2, s_d^2`` their variances and ``s_nd``
    their covariance (``ddof`` 1: the paper asks for unbiased estimates), the ratio estimate of
    van Kempen & van Vliet (2000, eqs. 9-10) is

        mean = mu_n / mu_d
        variance = (s_n^2 / mu_d^2 + mu_n^2 s_d^2 / mu_d^4 - 2 mu_n s_nd / mu_d^3) / R
    """
    b = np.asarray(auc_baseline, dtype=float).ravel()
    new = np.asarray(auc_new, dtype=float).ravel()
    if len(b) != len(new) or len(b) == 0:
        raise ValueError(
            f"RD-AUC needs the same number R >= 1 of runs, got {len(b)} and {len(new)}"
        )
    R = len(b)
    n = (b[:, None] - new[None, :]).ravel()  # the double loop of Algorithm 1, baseline outer
    d = np.repeat(b - auc_best, R)
    mu_n, mu_d = n.mean(), d.mean()
    if mu_d == 0:
        # the baseline sits on the bound (NLML: it is the lowest curve, flat): no scale to
        # measure a decrease against
        return RdAuc(float("nan"), float("nan"), R)
    if len(n) > ddof:
        var_n, var_d = n.var(ddof=ddof), d.var(ddof=ddof)
        cov_nd = ((n - mu_n) * (d - mu_d)).sum() / (len(n) - ddof)
        variance = (var_n / mu_d**2 + mu_n**2 * var_d / mu_d**4 - 2 * mu_n * cov_nd / mu_d**3) / R
    else:
        variance = float("nan")  # one pair: no spread to estimate
    return RdAuc(float(mu_n / mu_d), float(variance), R)


def rd_auc_curves(
    curves: dict[str, Curves], bounded: bool, baseline: str = BASELINE
) -> dict[str, RdAuc]:
    """RD-AUC of every acquisition of one simulator against ``baseline``.

    ``curves``: ``{acquisition: Curves}`` on one common ``n_labeled`` axis. ``bounded``: the
    metric's lower bound is 0 (RMSE); otherwise the lowest value in any curve is the bound (NLML).
    Runs are paired by run index: only runs that the baseline and the acquisition both have count.
    """
    if baseline not in curves:
        raise ValueError(f"no {baseline!r} runs to compare with")
    x = curves[baseline].n_labeled
    if bounded:
        best_auc = 0.0
    else:
        lowest = min(float(c.values.min()) for c in curves.values())
        best_auc = float(auc(np.full(len(x), lowest), x))
    base = curves[baseline]
    out = {}
    for acq, c in curves.items():
        common = np.intersect1d(base.runs, c.runs)
        b = auc(base.values[np.isin(base.runs, common)], x)
        new = auc(c.values[np.isin(c.runs, common)], x)
        out[acq] = rd_auc(b, new, best_auc)
    return out


def overall(means: dict[str, float]) -> dict[str, float]:
    """The paper's "overall performance" over simulators: mean, median and the +- beside both,
    which is the population sd (ddof 0) of the per-simulator means (it reproduces Table 2)."""
    v = np.array(list(means.values()), dtype=float)
    if len(v) == 0:
        return {"mean": float("nan"), "median": float("nan"), "sd": float("nan")}
    return {"mean": float(v.mean()), "median": float(np.median(v)), "sd": float(v.std())}


def summarize(records: list[dict], baseline: str = BASELINE) -> dict:
    """RD-AUC in percent for every metric, acquisition and simulator of a results list.

    Returns ``{metric: {acquisition: {simulator: {"mean", "sd", "runs"}, "overall_mean": {"mean",
    "sd"}, "overall_median": {"mean", "sd"}}}}``; the overall figures are over the paper's six
    simulators present (Motorcycle is not in the paper's table).
    """
    out: dict = {}
    for metric in (*METRICS, *OPTIONAL_METRICS):
        if metric in OPTIONAL_METRICS:
            mine = [r for r in records if r.get(metric) is not None]
            if not mine:
                continue
        else:
            mine = records
        per_acq: dict[str, dict] = {}
        for sim, curves in learning_curves(mine, metric).items():
            if baseline not in curves:
                continue
            for acq, r in rd_auc_curves(curves, BOUNDED[metric], baseline).items():
                cell = {"mean": 100 * r.mean, "sd": 100 * r.sd, "runs": r.runs}
                per_acq.setdefault(acq, {})[sim] = cell
        for cells in per_acq.values():
            stats = overall({s: c["mean"] for s, c in cells.items() if s in PAPER_SIMULATORS})
            cells["overall_mean"] = {"mean": stats["mean"], "sd": stats["sd"]}
            cells["overall_median"] = {"mean": stats["median"], "sd": stats["sd"]}
        out[metric] = per_acq
    return out


def load_paper_table() -> dict:
    """Table 2 of the paper (package data ``clients/data/paper_table2.json``)."""
    return json.loads(
        resources.files("fbgp_al.clients").joinpath("data/paper_table2.json").read_text()
    )


def _acquisition_order(names) -> list[str]:
    return [a for a in PAPER_ACQUISITIONS if a in names] + sorted(
        set(names) - set(PAPER_ACQUISITIONS)
    )


def _simulator_order(summary: dict) -> list[str]:
    present = {s for per_acq in summary.values() for cells in per_acq.values() for s in cells}
    return [s for s in SIMULATORS if s in present] + sorted(
        present - set(SIMULATORS) - {"overall_mean", "overall_median"}
    )


def table_json(summary: dict, paper: dict | None = None) -> dict:
    """Our RD-AUC beside the paper's: ``{"metrics": {metric: {acq: {column: {"ours", "paper"}}}}}``.

    ``ours`` is ``{"mean", "sd", "runs"}`` (percent) or None; ``paper`` is ``{"mean", "pm"}`` or
    None where the paper has no such entry.
    """
    paper = load_paper_table() if paper is None else paper
    sims = _simulator_order(summary)
    columns = [*sims, "overall_mean", "overall_median"]
    metrics = {}
    for metric, per_acq in summary.items():
        paper_metric = paper.get(PAPER_METRIC.get(metric, metric), {})
        rows = {}
        for acq in _acquisition_order(set(per_acq) | set(paper_metric)):
            rows[acq] = {
                col: {
                    "ours": per_acq.get(acq, {}).get(col),
                    "paper": paper_metric.get(acq, {}).get(col),
                }
                for col in columns
            }
        metrics[metric] = rows
    return {
        "statistic": "RD-AUC against the baseline, percent, positive is better",
        "baseline": BASELINE,
        "columns": columns,
        "overall_over": [s for s in sims if s in PAPER_SIMULATORS],
        "metrics": metrics,
    }


def _fmt(cell: dict | None, spread: str) -> str:
    if cell is None:
        return ""
    sd = cell[spread]
    return f"{cell['mean']:.1f} ± {sd:.1f}" if np.isfinite(sd) else f"{cell['mean']:.1f} ± n/a"


def table_markdown(summary: dict, paper: dict | None = None) -> str:
    """Markdown tables (one per metric): acquisitions as rows, each with an ``ours`` and a
    ``paper`` line; simulators, overall mean and overall median as columns; ``mean ± sd``."""
    data = table_json(summary, paper)
    header = [*data["columns"][:-2], "overall mean", "overall median"]
    lines = []
    for metric, rows in data["metrics"].items():
        lines += [
            f"### {TITLES.get(metric, metric.upper())}: relative decrease in AUC against "
            f"{data['baseline'].upper()} (%), positive is better",
            "",
            "| acquisition | source | " + " | ".join(header) + " |",
            "|---|---|" + "---|" * len(header),
        ]
        for acq, cells in rows.items():
            for source, spread in (("ours", "sd"), ("paper", "pm")):
                row = [_fmt(cells[c][source], spread) for c in data["columns"]]
                if source == "paper" and not any(row):
                    continue
                name = acq if source == "ours" else ""
                lines.append(f"| {name} | {source} | " + " | ".join(row) + " |")
        lines.append("")
    lines.append(f"Overall columns are over: {', '.join(data['overall_over']) or 'none'}.")
    return "\n".join(lines) + "\n"


def cell_gaps(ours: float, sd: float | None, paper: float, pm: float) -> tuple[float, float]:
    """How far our RD-AUC ``ours`` (± ``sd``) is from the paper's ``paper`` (± ``pm``):
    ``(gap, joint_gap)``, ``(ours - paper) / pm`` (a ``pm`` of 0 counts any difference as
    infinitely far) and ``(ours - paper) / sqrt(pm^2 + sd^2)`` (NaN while ``sd`` is unknown)."""
    diff = ours - paper
    infinite = 0.0 if diff == 0 else float(np.copysign(np.inf, diff))
    gap = diff / pm if pm > 0 else infinite
    spread = np.hypot(pm, np.nan if sd is None else sd)
    joint = diff / spread if np.isfinite(spread) and spread > 0 else float("nan")
    return gap, float(joint)


def far_from_paper(summary: dict, paper: dict | None = None, k: float = FAR) -> list[dict]:
    """Every (metric, acquisition, simulator) cell of ``summary`` whose RD-AUC is more than
    ``k`` of the paper's ``±`` away from the paper's: ``{"metric", "acquisition", "simulator",
    "ours", "sd", "runs", "paper", "pm", "gap", "joint_gap"}`` (percent; ``gap``: (ours -
    paper) / pm, in paper-sds; ``joint_gap``: (ours - paper) / sqrt(pm^2 + sd^2), counting our
    own estimate's spread too, NaN while ours has none; :func:`cell_gaps`), ordered by metric,
    acquisition and simulator. Simulators only (not the overall columns); a paper ``±`` of 0
    counts any difference as infinitely far. Both ``±`` are Algorithm 1's, the ratio
    estimate's standard deviation over the repetitions' pairs, so the paper's 10 repetitions
    and ours compare."""
    paper = load_paper_table() if paper is None else paper
    out = []
    for metric, per_acq in summary.items():
        paper_metric = paper.get(PAPER_METRIC.get(metric, metric), {})
        for acq in _acquisition_order(per_acq):
            for sim in PAPER_SIMULATORS:
                ours, theirs = per_acq[acq].get(sim), paper_metric.get(acq, {}).get(sim)
                if ours is None or theirs is None or not np.isfinite(ours["mean"]):
                    continue
                gap, joint = cell_gaps(ours["mean"], ours["sd"], theirs["mean"], theirs["pm"])
                if abs(gap) > k:
                    cell = {
                        "metric": metric,
                        "acquisition": acq,
                        "simulator": sim,
                        "joint_gap": joint,
                    }
                    out.append(
                        {
                            **cell,
                            "ours": ours["mean"],
                            "sd": ours["sd"],
                            "runs": ours["runs"],
                            "paper": theirs["mean"],
                            "pm": theirs["pm"],
                            "gap": gap,
                        }
                    )
    return out


def far_markdown(cells: list[dict], k: float = FAR) -> str:
    """:func:`far_from_paper`'s cells as a Markdown table."""
    if not cells:
        return f"No cell is more than {k:g} of the paper's ± from the paper's RD-AUC.\n"
    lines = [
        f"RD-AUC cells more than {k:g} of the paper's ± from the paper's (percent; gap: "
        "ours minus the paper's, in the paper's ±; joint gap: in sqrt(paper's ±^2 + our "
        "±^2), n/a while a cell has one repetition):",
        "",
        "| metric | acquisition | simulator | ours | paper | gap (paper sds) | joint gap |",
        "|---|---|---|---|---|---|---|",
    ]
    for c in cells:
        ours = _fmt({"mean": c["ours"], "sd": c["sd"]}, "sd") + f" ({c['runs']} runs)"
        paper = _fmt({"mean": c["paper"], "pm": c["pm"]}, "pm")
        joint = f"{c['joint_gap']:+.1f}" if np.isfinite(c.get("joint_gap", np.nan)) else "n/a"
        lines.append(
            f"| {c['metric']} | {c['acquisition']} | {c['simulator']} | {ours} | "
            f"{paper} | {c['gap']:+.1f} | {joint} |"
        )
    return "\n".join(lines) + "\n"


def _finite(obj):
    """``obj`` with every NaN/inf float replaced by None, so the file is strict JSON."""
    if isinstance(obj, dict):
        return {k: _finite(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_finite(v) for v in obj]
    if isinstance(obj, float) and not np.isfinite(obj):
        return None
    return obj


def write_table(
    results_path: str | Path, out_dir: str | Path, records: list[dict] | None = None
) -> tuple[Path, Path]:
    """Write ``rdauc.md`` and ``rdauc.json`` into ``out_dir`` from a results file (or from
    ``records`` read from it already)."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    summary = summarize(read_results(results_path) if records is None else records)
    paper = load_paper_table()
    md, js = out_dir / "rdauc.md", out_dir / "rdauc.json"
    far = far_from_paper(summary, paper)
    md.write_text(table_markdown(summary, paper) + "\n" + far_markdown(far), encoding="utf-8")
    table = {**table_json(summary, paper), "far_from_paper": far}
    text = json.dumps(_finite(table), indent=1, allow_nan=False)
    js.write_text(text, encoding="utf-8")
    return md, js
