"""What ``fbgp-al bench-failures`` records say (:func:`table`, :func:`goals`), from the records
of one run or of several (``fbgp-al bench-failures --table FILE [FILE ...]``).

:func:`table` gives, per case and failure model, the runs lost, the feasible RMSE and the
failure model's Brier score, and each classifier arm's RD-AUC against ``none``.
:func:`goals` reads each classifier arm against two goals. The runs it lost after the design:
their median over the repetitions, against a third of the median of random sampling's expected
loss on as many runs (:func:`random_loss`). Its final feasible RMSE against ``none``'s on the
same seeds: the geometric mean of the per-seed ratios and a two-sided confidence interval of
it, Student's t on the log ratios (``scipy.stats.ttest_1samp``). The error is "not shown worse"
when the interval reaches 1 or below, and "worse" when it lies wholly above 1.
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path

import numpy as np
from scipy import stats

from fbgp_al.clients.reproduction.rdauc import RdAuc, auc, rd_auc

CONFIDENCE = 0.9  # of the interval of the final RMSE's ratio to none's
SHARE = 1 / 3  # of random sampling's expected loss that the runs lost may reach


def read_records(paths: list[str]) -> list[dict]:
    """The records of JSONL files, in order (blank lines skipped)."""
    lines = [line for path in paths for line in Path(path).read_text().splitlines()]
    return [json.loads(line) for line in lines if line.strip()]


def curve_auc(record: dict) -> float:
    """The area under a campaign's feasible RMSE curve (``record["rmse_curve"]``), trapezoidal
    over ``n_labeled`` in unit steps from the end of the initial design (``record["design"]``)
    to the last label (``record["labels"]``, the campaign's ``max_labels``).

    At a number of labels with no model version recorded (a refit that was overtaken by the
    next label, or labels a stalled campaign never reached), the last value before it is
    carried forward. NaN when the curve has no value at or before the end of the design."""
    grid = np.arange(int(record["design"]), int(record["labels"]) + 1)
    known = dict(sorted((int(n), float(v)) for n, v in record.get("rmse_curve") or []))
    at = np.fromiter(known, dtype=int, count=len(known))
    values = np.append(np.nan, list(known.values()))  # index 0: nothing at or before
    return float(auc(values[np.searchsorted(at, grid, side="right")], grid))


def paired(records: list[dict], name: str, first: str, second: str, value) -> tuple[list, list]:
    """``value(record)`` of models ``first`` and ``second`` on case ``name``, over the seeds
    both have (in seed order), as two lists; a record whose value is None is left out."""
    by_seed = [
        {
            r["seed"]: v
            for r in records
            if r["simulator"] == name and r["model"] == m and (v := value(r)) is not None
        }
        for m in (first, second)
    ]
    seeds = sorted(set(by_seed[0]) & set(by_seed[1]))
    return [by_seed[0][s] for s in seeds], [by_seed[1][s] for s in seeds]


def rd_auc_by_simulator(
    records: list[dict], baseline: str = "none", new: str = "classifier"
) -> dict[str, RdAuc]:
    """Per simulator, the RD-AUC of the feasible RMSE curves (:func:`curve_auc`) of model
    ``new`` against ``baseline`` (the bound 0: RMSE's), over the repetitions (seeds) that both
    have: positive when ``new``'s curves lie lower. Simulators lacking either model are left
    out."""
    out = {}
    for name in sorted({r["simulator"] for r in records}):
        before, after = paired(records, name, baseline, new, curve_auc)
        if before:
            out[name] = rd_auc(before, after, auc_best=0.0)
    return out


def random_loss(record: dict) -> float:
    """Random sampling's expected loss over a campaign's runs after its design: their number
    times the region's share of the pool."""
    if record.get("random_loss") is not None:
        return float(record["random_loss"])
    return record["runs_after_design"] * record["region_fraction"]


def table(records: list[dict]) -> str:
    """Markdown: per case and model, the runs failed (pooled over the repetitions), the share
    failed after the design (median), the runs lost after the design against random sampling's
    expected loss on the same runs (:func:`random_loss`; medians over the repetitions), the
    median final feasible RMSE, the median area under the feasible RMSE curve
    (:func:`curve_auc`), on each classifier row the RD-AUC of its curves against ``none``'s
    (:func:`rd_auc_by_simulator`; percent, mean ± sd), and the failure model's median Brier
    score (:func:`brier`)."""
    lines = [
        "| case | region | model | reps | runs failed (pooled) | after the design, "
        "median share | lost after the design, median | random's expected loss, median "
        "| final feasible RMSE, median | RMSE AUC, median | RMSE RD-AUC against none (%) "
        "| Brier, median |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    keys = sorted({(r["simulator"], r["model"]) for r in records})
    rd = {m: rd_auc_by_simulator(records, new=m) for m in {k[1] for k in keys} - {"none"}}
    for name, model in keys:
        rs = [r for r in records if r["simulator"] == name and r["model"] == model]
        failed, runs = sum(r["failed"] for r in rs), sum(r["runs"] for r in rs)
        share = statistics.median(
            r["failed_after_design"] / max(1, r["runs_after_design"]) for r in rs
        )
        lost = statistics.median(r["failed_after_design"] for r in rs)
        expected = statistics.median(random_loss(r) for r in rs)
        rmse = statistics.median(r["rmse_feasible"] for r in rs)
        area = statistics.median(curve_auc(r) for r in rs)
        scores = [r["brier"] for r in rs if r.get("brier") is not None]
        score = f"{statistics.median(scores):.4f}" if scores else "n/a"
        if model == "none":
            versus = "baseline"
        elif name in rd[model]:
            against = rd[model][name]
            sd = f"{100 * against.sd:.1f}" if np.isfinite(against.sd) else "n/a"
            versus = f"{100 * against.mean:.1f} ± {sd}"
        else:
            versus = ""
        lines.append(
            f"| {name} | {rs[0]['region_fraction']:.0%} | {model} | {len(rs)} | "
            f"{failed}/{runs} | {share:.1%} | {lost:g} | {expected:.2f} | {rmse:.4g} "
            f"| {area:.4g} | {versus} | {score} |"
        )
    return "\n".join(lines)


def final_rmse(record: dict) -> float | None:
    return record.get("rmse_feasible") or None


def noise_rmse(record: dict) -> float | None:
    """The mean RMSE of the record's labels refitted under other draws of their noise
    (``rmse_noise``, :mod:`.failure_refit`), or None where it was not measured."""
    values = record.get("rmse_noise")
    return float(np.mean(values)) if values else None


def paired_ratio(
    records: list[dict], name: str, model: str, confidence: float = CONFIDENCE, value=final_rmse
) -> tuple[float, float, float, int]:
    """``value`` (the final feasible RMSE) of ``model`` over ``none``'s on case ``name``, over
    the seeds both have: the geometric mean of the per-seed ratios, the ``confidence``
    interval's lower and upper ends (Student's t on the log ratios; NaN with fewer than two
    seeds) and the number of seeds."""
    none, this = paired(records, name, "none", model, value)
    logs = np.log(np.divide(this, none))
    if len(logs) < 2:
        mean = float(np.exp(logs[0])) if len(logs) else np.nan
        return mean, np.nan, np.nan, len(logs)
    low, high = stats.ttest_1samp(logs, 0.0).confidence_interval(confidence)
    return float(np.exp(logs.mean())), float(np.exp(low)), float(np.exp(high)), len(logs)


def goals(records: list[dict], confidence: float = CONFIDENCE) -> str:
    """Markdown, one line per case and classifier arm: the runs it lost after the design
    (median) against ``SHARE`` (a third) of random sampling's expected loss (median), its final
    feasible RMSE against ``none``'s on the same seeds (:func:`paired_ratio`), and, where the
    records say (``rmse_noise``), the same of its labels' mean RMSE under other noise."""
    lines = [
        "| case | model | reps | lost after the design, median | bound (a third of random's)"
        f" | runs lost within it | final RMSE over none's, geometric mean ({confidence:.0%}"
        " interval) | seeds paired | final RMSE | the labels' RMSE under other noise over"
        " none's |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, model in sorted({(r["simulator"], r["model"]) for r in records}):
        if model == "none":
            continue
        rs = [r for r in records if r["simulator"] == name and r["model"] == model]
        lost = statistics.median(r["failed_after_design"] for r in rs)
        bound = SHARE * statistics.median(random_loss(r) for r in rs)
        ratio, low, high, paired = paired_ratio(records, name, model, confidence)
        if np.isnan(low):
            interval, verdict = "n/a", "n/a"
        else:
            interval = f"{ratio:.3f} ({low:.3f} to {high:.3f})"
            verdict = "worse" if low > 1.0 else "not shown worse"
        noise = paired_ratio(records, name, model, confidence, noise_rmse)
        labels = (
            "n/a" if np.isnan(noise[1]) else f"{noise[0]:.3f} ({noise[1]:.3f} to {noise[2]:.3f})"
        )
        lines.append(
            f"| {name} | {model} | {len(rs)} | {lost:g} | {bound:.2f} "
            f"| {'yes' if lost <= bound else 'no'} | {interval} | {paired} | {verdict} | {labels} |"
        )
    return "\n".join(lines)
