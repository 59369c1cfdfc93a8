"""The paper's four headline claims, checked against our RD-AUC summary.

Riis et al. (2022), Table 2 and section 5.3:

1. B-QBC has the best overall mean NLML RD-AUC (paper: 41.3 %).
2. QB-MGP has the best overall mean RMSE RD-AUC (paper: 12.0 %).
3. BALD is below the ALM baseline (paper: -8.0 % NLML, -48.6 % RMSE overall).
4. On Motorcycle (heteroscedastic noise) QB-MGP does better than B-QBC (a figure in the paper;
   we compare their RD-AUC on both metrics).

Each check reads :func:`clients.reproduction.rdauc.summarize`'s output and says ``held``,
``not held``, ``mixed`` (one metric of two) or ``not tested`` (an acquisition or simulator is
missing), with the numbers it used. Where the records carry ``nlml_paper`` (the NLML as the
paper's code computes it, the one behind the paper's figures), the claims on NLML are checked
again with it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Claim:
    text: str
    verdict: str  # held | not held | mixed | not tested
    evidence: str


def _overall(summary: dict, metric: str) -> dict[str, float]:
    """``{acquisition: overall mean RD-AUC (%)}`` where that mean is finite."""
    out = {}
    for acq, cells in summary.get(metric, {}).items():
        value = cells.get("overall_mean", {}).get("mean")
        if value is not None and np.isfinite(value):
            out[acq] = float(value)
    return out


def _pct(value: float) -> str:
    """A percentage to one decimal; a rounding residue of zero (ALM against itself) reads 0.0."""
    return f"{round(value, 1) + 0.0:.1f} %"


def _best(summary: dict, metric: str, acquisition: str, text: str) -> Claim:
    means = _overall(summary, metric)
    if acquisition not in means or len(means) < 2:
        return Claim(text, "not tested", f"needs {acquisition} and another acquisition")
    ranked = sorted(means.items(), key=lambda kv: -kv[1])
    evidence = ", ".join(f"{a} {_pct(v)}" for a, v in ranked)
    held = means[acquisition] >= ranked[0][1]
    return Claim(text, "held" if held else "not held", f"overall mean {_name(metric)}: {evidence}")


def _name(metric: str) -> str:
    return "NLML (paper's code)" if metric == "nlml_paper" else metric.upper()


def _verdict(results: list[bool]) -> str:
    return "held" if all(results) else "not held" if not any(results) else "mixed"


def _bald(summary: dict, nlml: str = "nlml", suffix: str = "") -> Claim:
    text = "BALD is below the ALM baseline (negative overall mean RD-AUC)" + suffix
    found = {m: _overall(summary, m).get("bald") for m in (nlml, "rmse")}
    found = {m: v for m, v in found.items() if v is not None}
    if not found:
        return Claim(text, "not tested", "needs bald and alm on a paper simulator")
    evidence = ", ".join(f"{_name(m)} {_pct(v)}" for m, v in found.items())
    return Claim(text, _verdict([v < 0 for v in found.values()]), f"bald overall: {evidence}")


def _motorcycle(summary: dict, nlml: str = "nlml", suffix: str = "") -> Claim:
    text = "On Motorcycle QB-MGP is better than B-QBC (higher RD-AUC)" + suffix
    results, evidence = [], []
    for metric in (nlml, "rmse"):
        cells = summary.get(metric, {})
        qb = cells.get("qb-mgp", {}).get("motorcycle")
        bq = cells.get("b-qbc", {}).get("motorcycle")
        if qb is None or bq is None:
            continue
        results.append(qb["mean"] > bq["mean"])
        evidence.append(f"{_name(metric)} qb-mgp {_pct(qb['mean'])} vs b-qbc {_pct(bq['mean'])}")
    if not results:
        return Claim(text, "not tested", "needs qb-mgp, b-qbc and alm on motorcycle")
    return Claim(text, _verdict(results), "; ".join(evidence))


def check_claims(summary: dict) -> list[Claim]:
    """The four claims against ``summary`` (:func:`clients.reproduction.rdauc.summarize`); then,
    where it has ``nlml_paper``, the three that read NLML again with it."""
    claims = [
        _best(summary, "nlml", "b-qbc", "B-QBC has the best overall mean NLML RD-AUC"),
        _best(summary, "rmse", "qb-mgp", "QB-MGP has the best overall mean RMSE RD-AUC"),
        _bald(summary),
        _motorcycle(summary),
    ]
    if summary.get("nlml_paper"):
        suffix = ", with the paper's code's NLML"
        text = "B-QBC has the best overall mean NLML RD-AUC" + suffix
        claims += [
            _best(summary, "nlml_paper", "b-qbc", text),
            _bald(summary, "nlml_paper", suffix),
            _motorcycle(summary, "nlml_paper", suffix),
        ]
    return claims


def claims_markdown(claims: list[Claim]) -> str:
    """A Markdown list: ``- **held**: claim (evidence)``."""
    return "\n".join(f"- **{c.verdict}**: {c.text}. {c.evidence}." for c in claims) + "\n"
