"""How a model's hyperparameters were drawn, in one line for logs and pages: a model body's
``diagnostics`` (NUTS's R-hat, bulk ESS and divergences; or a large campaign's Laplace mixture,
:mod:`worker.laplace`, with its Pareto ``k`` against its limit and its importance ESS)."""

from __future__ import annotations


def sampler_line(d: dict) -> str:
    """``diagnostics`` as ``"NUTS: R-hat 1.012, bulk ESS 187, 0 divergences"`` or ``"Laplace
    mixture: Pareto k 0.31 (at most 0.54), importance ESS 95, 1 mode"``; a NUTS refit that
    tried the mixture says what ruled it out."""
    if d.get("method") == "laplace":
        modes = int(d.get("modes", 1))
        plural = "s" if modes != 1 else ""
        return (
            f"Laplace mixture: Pareto k {d['khat']:.2f} (at most {d['khat_limit']:.2f}), "
            f"importance ESS {d['importance_ess']:.0f}, {modes} mode{plural}"
        )
    shown = (("max_rhat", "R-hat", ".3f"), ("min_ess_bulk", "bulk ESS", ".0f"))
    parts = [f"{name} {d[key]:{form}}" for key, name, form in shown if d.get(key) is not None]
    line = "NUTS: " + ", ".join([*parts, f"{int(d.get('divergences', 0))} divergences"])
    tried = d.get("laplace")
    if tried:
        line += (
            f" (the Laplace mixture's Pareto k {tried['khat']:.2f} was above "
            f"{tried['khat_limit']:.2f})"
        )
    return line
