"""A warm refit against the full treatment by NUTS: Hartmann 6-D, the labels, campaign and cold
model of ``scale_benchmark --quality`` (uniform random labels, a default campaign), the warm
refit at ``n + 1`` labels (the service's default path: past ``mcmc.laplace_from`` a Laplace
mixture, a screen, an exact pass on some of the draws) and two NUTS references on the same
labels, each the project's own NUTS (a refit below ``laplace_from``: the campaign's settings but
for the chains, warm-ups and draws per chain named here, every draw kept, no target), with
seeds of their own, on one thread each:

    OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 MKL_NUM_THREADS=1 \\
        python -m fbgp_al.clients.reproduction.nuts_reference --sizes 600

``--start warm`` (the default) starts reference 1 from the cold model at ``n`` (as a campaign's
refit there would start) and reference 2 from the warm refit's mixture (other draws of the same
modes), each with ``--warm-warmup`` iterations of step-size adaptation (redone cold, as a refit
is, where its draws do not mix); ``--start cold`` starts both from the posterior's modes with
``--warmup`` iterations. Reported: each reference's R-hat, ESS, divergences, gradients and
seconds; every candidate of the pool subsample scored exactly by each reference's every draw,
where the refit's point stands in those rankings (in the top 1%?) and where each reference's
best stands in the other's; the predictive mean and variance at 2,000 seeded uniform test
points, the refit's mixture against reference 1 beside reference 2 against reference 1 (the
noise of the draws), and each one's RMSE against the function. The same refit is sampled again
on another seed (``refits_apart``, its mixture against the first's): how far the refit's own
draws move its predictions, beside how far they lie from NUTS. ``--references 0`` runs the two
refits alone (minutes where the references take most of an hour at 2,001 labels).
``--proposals P`` adds two mixtures of ``P`` weighed proposals each (the refit's seed and
another): how far more proposals take the mixture from the refit, from each other and from NUTS.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from dataclasses import replace

import numpy as np

from fbgp_al.clients.reproduction.scale_benchmark import _before_warm, hartmann6

# chains, a cold chain's warm-up, a warm chain's step-size warm-up, draws kept per chain: at
# 2,001 labels, warm, one thread, about 17 minutes of sampling and 6 of scoring per reference
DEFAULTS = {"chains": 4, "warmup": 100, "warm_warmup": 50, "samples": 40}
TOP = 0.01  # the share of the exact ranking the refit's point must fall in
TEST_POINTS = 2000
DIAGNOSTICS = (
    "warm_start",
    "max_rhat",
    "min_ess_bulk",
    "divergences",
    "warmup_divergences",
    "gradient_evaluations",
    "leapfrogs_per_draw",
    "tree_depth_mean",
    "accept_mean",
    "seconds",
)


def reference_spec(spec: dict, chains: int, warmup: int, warm_warmup: int, samples: int) -> dict:
    """The campaign with NUTS at every size: ``chains`` chains of ``samples`` draws each, all
    kept (no target), after ``warmup`` (cold) or ``warm_warmup`` (warm) iterations."""
    mcmc = dict(spec["mcmc"], laplace_from=None, chains=chains, warmup=warmup, samples=samples)
    return dict(spec, mcmc=dict(mcmc, warm_warmup=warm_warmup, thinning=1, draws=None))


def predicted(data, post, points):
    """Every draw's predictive mean and variance of ``y`` at ``points`` (draws x points each,
    standardized units), each distinct draw fitted once."""
    import torch

    from fbgp_al.worker.acquisition import DrawGPs

    rows = torch.cat([post.lengthscale, post.noise[:, None]], 1)
    unique, index = torch.unique(rows, dim=0, return_inverse=True)
    gps = DrawGPs(data.u, data.z, unique[:, :-1].contiguous(), unique[:, -1].contiguous())
    mean, var = gps.predict(points)
    return mean[index], var[index]


def mixture(mean, var) -> tuple[np.ndarray, np.ndarray]:
    """The equal-weight mixture's mean and variance of the draws' predictions."""
    return mean.mean(0).numpy(), (var.mean(0) + mean.var(0, correction=0)).numpy()


def apart(a: tuple, b: tuple) -> dict:
    """How far mixture ``a``'s means (absolute, standardized) and variances (relative) lie from
    ``b``'s: the largest, and the mean (means) or median (variances)."""
    means, variances = np.abs(a[0] - b[0]), np.abs(a[1] / b[1] - 1)
    return {
        "mean_max": float(means.max()),
        "mean_mean": float(means.mean()),
        "variance_max": float(variances.max()),
        "variance_median": float(np.median(variances)),
    }


def hyperparameters(post) -> dict:
    """The draws' mean and sd of each log hyperparameter (the ``d`` log lengthscales, then the
    log noise variance): where two posteriors' predictions part, whether their draws do."""
    logs = post.log_draws().numpy()
    return {"mean": logs.mean(0).round(4).tolist(), "sd": logs.std(0).round(4).tolist()}


def rank_in(order: np.ndarray, position: int) -> int:
    """Where candidate ``position`` stands (1: first) in a ranking (candidates, best first)."""
    return int(np.flatnonzero(order == position)[0]) + 1


def reference(spec: dict, data, warm: dict | None, offset: int, cand_u, test) -> dict:
    """A NUTS posterior of ``spec`` (a :func:`reference_spec`) on ``data`` at the refit's seed
    plus ``offset``, warm from ``warm`` (None: cold): its diagnostics, its exact ranking of the
    candidates (every draw, every candidate) and its mixture at ``test``."""
    import torch

    from fbgp_al.worker import fitting
    from fbgp_al.worker.acquisition import scorer

    post = fitting.posterior(spec, replace(data, seed=(data.seed + offset) % 2**32), warm)
    started = time.perf_counter()
    mean, var = predicted(data, post, torch.cat([cand_u, test]))
    c = len(cand_u)
    scores = scorer(spec["acquisition"], post.noise)(mean[:, :c], var[:, :c]).numpy()
    d, rows = post.diagnostics, torch.cat([post.lengthscale, post.noise[:, None]], 1)
    return {
        "post": post,
        "order": np.argsort(-scores, kind="stable"),
        "mixture": mixture(mean[:, c:], var[:, c:]),
        "diagnostics": {k: d.get(k) for k in DIAGNOSTICS}
        | {"draws": post.size, "distinct": len(torch.unique(rows, dim=0))}
        | {"hyperparameters": hyperparameters(post)}
        | {"scoring_s": time.perf_counter() - started},
    }


def quality(
    n: int,
    seed: int,
    previous: dict | None = None,
    settings: dict | None = None,
    start: str = "warm",
    references: bool = True,
    proposals: int | None = None,
) -> dict:
    """The warm refit at ``n + 1`` labels (from ``previous``, the cold model at ``n``; None:
    refitted here) against two NUTS references on its labels (``settings``: :data:`DEFAULTS`'
    keys, ``start``: ``"warm"`` or ``"cold"``, see the module): its point's rank in their exact
    rankings, its predictions against reference 1's beside reference 2's, and beside the same
    refit's on another seed (``refits_apart``). Without ``references``, the refits alone. With
    ``proposals``, two mixtures of that many proposals beside them (``proposals_*``)."""
    import torch

    from fbgp_al.worker import fitting
    from fbgp_al.worker.fitting.ranking import candidates_of
    from fbgp_al.worker.vocabulary.pools import pool_of

    settings = DEFAULTS | (settings or {})
    spec, labels, previous = _before_warm(n, seed, previous)
    started = time.perf_counter()
    sampled = fitting.sample(spec, labels, previous, 4000)
    pool = pool_of(spec)
    _, ranking = fitting.rank(spec, sampled, pool, set(), [], [], started)
    refit_s = time.perf_counter() - started
    data, post = sampled.data, sampled.post
    candidates, cand_u, _, _ = candidates_of(spec, pool, data.space, data.n, set(), [])
    chosen = int(np.flatnonzero(candidates == ranking[0]["index"])[0])
    test = torch.from_numpy(np.random.default_rng(seed + 1).random((TEST_POINTS, 6)))
    this = mixture(*predicted(data, post, test))
    warm = fitting.warm_start_of(spec, previous)
    again = fitting.posterior(spec, replace(data, seed=(data.seed + 1000) % 2**32), warm)
    truth = (hartmann6(test.numpy()) - data.scale_y.mean) / data.scale_y.std
    refits = {
        "n": data.n,
        "sampler": post.diagnostics.get("method", "nuts"),
        "khat": post.diagnostics.get("khat"),
        "distinct_draws": post.diagnostics.get("distinct_draws"),
        "refit_s": refit_s,
        "refits_apart": apart(mixture(*predicted(data, again, test)), this),
        "hyperparameters": [hyperparameters(p) for p in (post, again)],
        "rmse_this": float(np.sqrt(np.mean((this[0] - truth) ** 2))),
    }
    wide = []
    if proposals:
        more = [
            fitting.posterior(
                spec, replace(data, seed=(data.seed + offset) % 2**32), warm, 4000, proposals
            )
            for offset in (0, 1000)
        ]
        wide = [mixture(*predicted(data, p, test)) for p in more]
        refits |= {
            "proposals": proposals,
            "proposals_importance_ess": [p.diagnostics.get("importance_ess") for p in more],
            "proposals_apart": apart(wide[1], wide[0]),
            "proposals_this": [apart(w, this) for w in wide],
        }
    if not references:
        return refits | {"seconds": time.perf_counter() - started}
    nuts = reference_spec(spec, **settings)
    warms = (warm, post.adaptation)
    one, other = (
        reference(nuts, data, warm if start == "warm" else None, offset, cand_u, test)
        for offset, warm in enumerate(warms, 1)
    )
    top = math.ceil(TOP * len(candidates))
    rank = rank_in(one["order"], chosen)
    out = refits | {
        "nuts": settings | {"start": start},
        "references": [one["diagnostics"], other["diagnostics"]],
        "candidates": len(candidates),
        "top": top,
        "chosen": int(ranking[0]["index"]),
        "chosen_rank": rank,
        "chosen_in_top": rank <= top,
        "chosen_rank_other": rank_in(other["order"], chosen),
        "best": int(candidates[one["order"][0]]),
        "other_best_rank": rank_in(one["order"], int(other["order"][0])),
        "this_apart": apart(this, one["mixture"]),
        "references_apart": apart(other["mixture"], one["mixture"]),
    }
    if wide:
        out["proposals_one"] = [apart(w, one["mixture"]) for w in wide]
    for name, (m, _) in (("one", one["mixture"]), ("other", other["mixture"])):
        out[f"rmse_{name}"] = float(np.sqrt(np.mean((m - truth) ** 2)))
    out["seconds"] = time.perf_counter() - started
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", default="600,2000", help="labels, comma-separated")
    parser.add_argument("--seed", type=int, default=0, help="the data set's seed")
    parser.add_argument("--previous", help="the cold model at the size (JSON; else refitted)")
    helps = ("NUTS chains", "a cold chain's warm-up", "a warm chain's warm-up", "draws per chain")
    for (name, value), text in zip(DEFAULTS.items(), helps, strict=True):
        parser.add_argument(f"--{name.replace('_', '-')}", type=int, default=value, help=text)
    parser.add_argument(
        "--start", choices=("warm", "cold"), default="warm", help="where the chains start"
    )
    parser.add_argument(
        "--proposals", type=int, help="two mixtures of this many weighed proposals beside"
    )
    parser.add_argument(
        "--references",
        type=int,
        choices=(0, 2),
        default=2,
        help="NUTS references (0: the refit and the same refit on another seed only)",
    )
    args = parser.parse_args(argv)
    previous = None
    if args.previous:
        with open(args.previous) as f:
            previous = json.load(f)
    settings = {name: getattr(args, name) for name in DEFAULTS}
    for n in (int(s) for s in args.sizes.split(",")):
        print(
            json.dumps(
                quality(
                    n,
                    args.seed,
                    previous,
                    settings,
                    args.start,
                    args.references > 0,
                    args.proposals,
                )
            ),
            flush=True,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
