"""How much of a record's final error is its labels' noise (``fbgp-al bench-failures --spread
FILE``): its labels refitted under other draws of the simulator's noise.

A record of :func:`clients.reproduction.failure_regions.run_one` holds where its campaign put
its labels (``labeled_at``, or ``runs_at`` where that holds every run). :func:`refit_rmse` fits
the GP to labels at those points from a cold start with the service's default chains, warm-up
and samples (:data:`worker.vocabulary.defaults.MCMC_DEFAULTS`, or a preset's) and gives the RMSE
of its mean
over the record's feasible test points, as ``run_one`` measures a campaign's (``feasible``:
``failure_regions.feasible_test``, passed in as this module is below that one). :func:`spread`
does so under ``draws`` seeded draws of the noise at the same points: how far the final RMSE of
one set of labels moves with their noise alone. Two arms whose labels were drawn with
independent noise differ by that much on one seed even where they put their labels alike; the
mean over the draws (``rmse_noise``, :func:`with_spread`) says how good the labels' places are,
without their noise's luck.
"""

from __future__ import annotations

import numpy as np
import torch

from fbgp_al.clients.reproduction.core_data import fit
from fbgp_al.clients.reproduction.failure_trace import model_features
from fbgp_al.worker import gp
from fbgp_al.worker.transforms import OutputStandardization
from fbgp_al.worker.vocabulary.defaults import MCMC_DEFAULTS, MCMC_PRESETS

DRAWS = 8  # noise draws per record


def labeled_points(record: dict) -> np.ndarray | None:
    """The pool coordinates of a record's labels in order (``n x d``), or None where the record
    does not hold them all (``runs_at`` is cut at its first 500 runs)."""
    if record.get("labeled_at") is not None:
        return np.asarray(record["labeled_at"], dtype=np.float64)
    runs = record.get("runs_at") or []
    if len(runs) != record["runs"]:
        return None
    return np.asarray([u for u, failed in runs if not failed], dtype=np.float64)


def _features(sim, unit: np.ndarray) -> torch.Tensor:
    return torch.from_numpy(np.asarray(model_features(sim, unit), dtype=np.float64))


def refit_rmse(sim, test: np.ndarray, seed: int, unit: np.ndarray, y, mcmc=None) -> float:
    """The RMSE over the points ``test`` (pool coordinates) of a GP fitted cold to labels ``y``
    of ``sim`` at pool coordinates ``unit``, its chains seeded by ``seed``: a refit as the
    service runs it (:func:`.core_data.fit`) with its default chains, warm-up and samples (or a
    preset's, ``mcmc``), a fixed count of draws rather than sampling to a target."""
    settings = {**MCMC_DEFAULTS, **(MCMC_PRESETS[mcmc] if mcmc else {}), "draws": None}
    u, u_test = _features(sim, unit), _features(sim, test)
    scale = OutputStandardization.from_labels(np.asarray(y, dtype=np.float64))
    z = scale.to_z(np.asarray(y, dtype=np.float64))
    post = fit(u, z, settings, seed)
    mean, _ = gp.predict(u, z, post.lengthscale, post.noise, u_test)
    prediction = scale.mean_from_z(mean).mean(0).numpy()
    return float(np.sqrt(np.mean((prediction - sim.mean(sim.from_unit(test))) ** 2)))


def spread(record: dict, feasible, draws: int = DRAWS, mcmc=None) -> list[float] | None:
    """The record's labels refitted under ``draws`` seeded draws of their noise: the feasible
    RMSE of each (None where the record does not hold its labels). ``feasible(case, seed)``:
    the case's simulator and the repetition's feasible test points."""
    unit = labeled_points(record)
    if unit is None:
        return None
    sim, test = feasible(record["simulator"], record["seed"])
    x = sim.from_unit(unit)
    out = []
    for k in range(draws):
        y = sim.sample(x, np.random.default_rng([record["seed"], 13, k]))
        out.append(refit_rmse(sim, test, record["seed"], unit, y, mcmc))
    return out


def with_spread(records: list[dict], feasible, draws: int = DRAWS, mcmc=None) -> list[dict]:
    """The records that hold their labels, each with ``rmse_noise``: :func:`spread`'s RMSEs."""
    out = []
    for record in records:
        values = spread(record, feasible, draws, mcmc)
        if values is not None:
            out.append({**record, "rmse_noise": values})
    return out


def spread_table(records: list[dict]) -> str:
    """A line per record with ``rmse_noise``: its final RMSE, its labels' RMSE under the other
    draws of their noise, and the sd of their logs; then each case's mean sd."""
    lines = ["| case | model | seed | final RMSE | refitted under other noise | sd of log |"]
    lines.append("|---|---|---|---|---|---|")
    by_case: dict[str, list[float]] = {}
    for record in records:
        values = record["rmse_noise"]
        sd = float(np.std(np.log(values), ddof=1))
        by_case.setdefault(record["simulator"], []).append(sd)
        refits = ", ".join(f"{v:.4g}" for v in values)
        lines.append(
            f"| {record['simulator']} | {record['model']} | {record['seed']} | "
            f"{record['rmse_feasible']:.4g} | {refits} | {sd:.3f} |"
        )
    lines.append("")
    for case, sds in by_case.items():
        lines.append(f"{case}: sd of the log RMSE {np.mean(sds):.3f}, mean of {len(sds)} records")
    return "\n".join(lines)
