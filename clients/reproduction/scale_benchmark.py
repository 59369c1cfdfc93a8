"""Where a refit's time and memory go as the labels grow: Hartmann 6-D, uniform random points
with noise of sd 0.01, a default campaign (the schema's defaults: the Laplace mixture from 200
labels), timed part by part in the worker's math, in one process per size (its peak resident
memory its own):

    python -m fbgp_al.clients.reproduction.scale_benchmark --sizes 1000,2000

For each size ``n``, a cold refit (no previous model: the first model of an import of ``n``
labels) and a warm one (one label more, from the cold one's model: a label's next point):
the posterior's seconds, its density and gradient evaluations and distinct draws, the accuracy
estimates' seconds, the ranking's (the scoring and the rest), the whole refit's, the peak
memory and the next point (its pool index). Each process runs on one thread, as a worker does
(``--threads``). ``--python`` runs the same measurement with another environment's interpreter
(another tree's ``fbgp_al``), so that two trees are measured side by side in one run
(``--rounds`` interleaves them). ``--modes`` compares the cold mode search on a subset of the
labels with the search on all of them instead. The stack's own share of a label's path (the
store, the queue, the wake-up) is ``fbgp-al bench-service``'s.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from dataclasses import replace

import numpy as np

from fbgp_al.clients.ops.cli import THREAD_VARIABLES
from fbgp_al.clients.simulators import hartmann6_mean

NOISE_SD = 0.01
hartmann6 = hartmann6_mean  # on the unit cube (its minimum -3.32237)


def labels_of(n: int, seed: int) -> list[dict]:
    """``n`` labels at uniform random points, seeded."""
    rng = np.random.default_rng(seed)
    x = rng.random((n, 6))
    y = hartmann6(x) + NOISE_SD * rng.standard_normal(n)
    return [{"x": a.tolist(), "y": float(b), "index": None} for a, b in zip(x, y, strict=True)]


def spec_of() -> dict:
    """A default campaign over the unit cube in 6-D (a 10-level grid pool)."""
    from fbgp_al.service.schemas.campaigns import CampaignCreate

    body = {
        "name": "scale",
        "inputs": [{"name": f"x{i}", "lower": 0.0, "upper": 1.0} for i in range(6)],
        "pool": {"type": "grid", "points_per_dim": 10},
        "initial_design": {"type": "maximin-lhs", "size": 10},
        "max_labels": 100_000,
        "seed": 0,
    }
    return dict(CampaignCreate(**body).model_dump(), id="scale")


def refit(spec: dict, labels: list[dict], previous: dict | None) -> tuple[dict, dict]:
    """One refit as a job runs it, all in this process: its model and its parts' seconds."""
    from fbgp_al.worker import fitting
    from fbgp_al.worker.vocabulary.pools import pool_of

    started = time.perf_counter()
    sampled = fitting.sample(spec, labels, previous, 4000)
    sampled_at = time.perf_counter()
    model, ranking = fitting.rank(spec, sampled, pool_of(spec), set(), [], [], started)
    done = time.perf_counter()
    d, accuracy = model["diagnostics"], model.get("accuracy") or {}
    parts = {
        "n": len(labels),
        "sampler": d.get("method", "nuts"),
        "posterior_s": sampled_at - started,
        "evaluations": (d.get("gradient_evaluations") or 0) + (d.get("value_evaluations") or 0),
        "distinct_draws": d.get("distinct_draws"),
        "draws": len(model["samples"]["noise"]),
        "accuracy_s": accuracy.get("seconds"),
        "rank_s": done - sampled_at,
        "refit_s": done - started,
        "next": ranking[0]["index"] if ranking else None,
    }
    return model, parts


def one(n: int, seed: int) -> dict:
    """The cold and the warm refit at ``n`` labels, and this process's peak memory."""
    spec, labels = spec_of(), labels_of(n + 1, seed)
    model, cold = refit(spec, labels[:n], None)
    _, warm = refit(spec, labels, model)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6  # kB to GB
    return {"cold": cold, "warm": warm, "peak_gb": peak}


def modes(n: int, seed: int) -> dict:
    """The cold mode search at ``n`` labels as a refit runs it (on a subset past
    :data:`worker.cold_start.SEARCH_LABELS`) and on every label, on the same potential: each
    one's seconds, gradients and values of every label's density, and how far their best modes
    lie apart (in the potential, and in the largest log-hyperparameter)."""
    from fbgp_al.worker import cold_start, fitting
    from fbgp_al.worker.laplace import Counted, modes_of
    from fbgp_al.worker.potential import GPPotential

    spec = spec_of()
    data = fitting.prepare(spec, labels_of(n, seed))
    floor = fitting.noise_floor(spec)
    out, best = {}, {}
    for name, limit in (("subset", cold_start.SEARCH_LABELS), ("all", n)):
        potential = Counted(
            GPPotential(data.u.numpy(), data.z.numpy(), None, data.prior_mean, floor)
        )
        kept, cold_start.SEARCH_LABELS = cold_start.SEARCH_LABELS, limit
        started = time.perf_counter()
        try:
            (found, weights, _), *_ = modes_of(potential, None, n, 0)
        finally:
            cold_start.SEARCH_LABELS = kept
        seconds = time.perf_counter() - started
        top = found[int(np.argmax(weights))]
        best[name] = (float(potential.potential.values(top[None])[0]), top)
        out[name] = {
            "seconds": seconds,
            "gradients": potential.gradients,
            "values": potential.values_only,
            "modes": len(found),
        }
    out["potential_apart"] = abs(best["subset"][0] - best["all"][0])
    out["theta_apart"] = float(np.abs(best["subset"][1] - best["all"][1]).max())
    return out


def _mixture(gps, points) -> tuple[np.ndarray, np.ndarray]:
    """The equal-weight mixture's mean and variance of ``y`` at ``points`` (standardized)."""
    mean, var = gps.predict(points)
    return mean.mean(0).numpy(), (var.mean(0) + mean.var(0, correction=0)).numpy()


def _before_warm(n: int, seed: int, previous: dict | None) -> tuple[dict, list[dict], dict]:
    """A warm refit's setting at ``n + 1`` labels: the campaign, its labels, and the cold model
    at ``n`` (``previous``, or refitted here)."""
    spec, labels = spec_of(), labels_of(n + 1, seed)
    if previous is None:
        previous, _ = refit(spec, labels[:n], None)
    return spec, labels, previous


def quality(n: int, seed: int, previous: dict | None = None) -> dict:
    """What a warm refit at ``n + 1`` labels (from ``previous``, the cold model at ``n``; None:
    refitted here) chose against the full treatment: every draw scoring every candidate (the
    exact ranking, where its point stands there; the screen on fewer draws, where the exact
    best stands in its order), and its mixture's predictive mean and variance at 2,000 test
    points against two mixtures of 150 densities weighed (the same modes, other draws): how
    far apart they lie, beside how far the two references lie from each other."""
    import torch

    from fbgp_al.worker import fitting
    from fbgp_al.worker.acquisition import DrawGPs, scorer
    from fbgp_al.worker.fitting.ranking import candidates_of
    from fbgp_al.worker.laplace import laplace_posterior
    from fbgp_al.worker.vocabulary.pools import pool_of

    spec, labels, previous = _before_warm(n, seed, previous)
    started = time.perf_counter()
    sampled = fitting.sample(spec, labels, previous, 4000)
    pool = pool_of(spec)
    _, ranking = fitting.rank(spec, sampled, pool, set(), [], [], started)
    data, post = sampled.data, sampled.post
    candidates, cand_u, _, _ = candidates_of(spec, pool, data.space, data.n, set(), [])
    gps = DrawGPs(data.u, data.z, post.lengthscale, post.noise)
    mean, var = gps.predict(cand_u)
    exact = scorer(spec["acquisition"], post.noise)(mean, var).numpy()
    order = np.argsort(-exact, kind="stable")
    chosen = int(np.flatnonzero(candidates == ranking[0]["index"])[0])
    out = {
        "n": data.n,
        "sampler": post.diagnostics.get("method", "nuts"),
        "khat": post.diagnostics.get("khat"),
        "distinct_draws": post.diagnostics.get("distinct_draws"),
        "chosen_rank": int(np.flatnonzero(order == chosen)[0]) + 1,
        "candidates": len(candidates),
        "screens": {},
    }
    index = torch.arange(len(post.noise), dtype=torch.float64)[:, None]
    for draws in (15, 8, 5, 3):
        rows = replace(post, lengthscale=index).spread(draws).lengthscale[:, 0].long()
        rough = scorer(spec["acquisition"], post.noise[rows])(mean[rows], var[rows]).numpy()
        rough_order = np.argsort(-rough, kind="stable")
        out["screens"][draws] = {
            "exact_best_at": int(np.flatnonzero(rough_order == order[0])[0]) + 1,
            "top64_in_kept256": len(set(order[:64]) & set(rough_order[:256])) / 64,
        }
    rng = np.random.default_rng(seed + 1)
    test = torch.from_numpy(rng.random((2000, 6)))
    this = _mixture(gps, test)
    refs = []
    for s in (1, 2):
        ref = laplace_posterior(
            data.u,
            data.z,
            len(post.noise),
            data.seed + s,
            previous=previous["adaptation"],
            prior_mean=data.prior_mean,
            noise_floor=post.diagnostics["noise_floor"],
            proposals=150,
        )
        refs.append(_mixture(DrawGPs(data.u, data.z, ref.lengthscale, ref.noise), test))
    truth = (hartmann6(test.numpy()) - data.scale_y.mean) / data.scale_y.std
    for name, (m, _) in (("this", this), ("reference", refs[0]), ("other", refs[1])):
        out[f"rmse_{name}"] = float(np.sqrt(np.mean((m - truth) ** 2)))
    for name, (a, b) in (("this", (this, refs[0])), ("references", (refs[1], refs[0]))):
        out[f"mean_apart_{name}"] = float(np.abs(a[0] - b[0]).max())
        out[f"variance_apart_{name}"] = float(np.abs(a[1] / b[1] - 1).max())
    out["seconds"] = time.perf_counter() - started
    return out


def khat(n: int, seed: int, sets: int, previous: dict | None = None) -> list[dict]:
    """The Pareto ``k`` of the warm mixture at ``n + 1`` labels (from ``previous``, the cold
    model at ``n``; None: refitted here) over ``sets`` sets of 150 draws, each drawn and weighed
    as :func:`worker.laplace.laplace_posterior` does at its seed: ``k``, its limit and the
    importance ESS of all 150, of the first 100 and of the first 75."""
    from fbgp_al.worker import fitting
    from fbgp_al.worker.laplace import (
        PROPOSAL_DF,
        Counted,
        khat_limit,
        mixture_draws,
        mixture_log_density,
        modes_of,
        psis,
    )
    from fbgp_al.worker.potential import GPPotential

    spec, labels, previous = _before_warm(n, seed, previous)
    data = fitting.prepare(spec, labels)
    floor = fitting.noise_floor(spec)
    potential = Counted(GPPotential(data.u.numpy(), data.z.numpy(), None, data.prior_mean, floor))
    (modes, weights, scales), *_ = modes_of(potential, previous["adaptation"], n + 1, 0)
    out = []
    for s in range(sets):
        rng = np.random.default_rng(np.random.SeedSequence(s, spawn_key=(7,)))
        drawn = mixture_draws(150, modes, weights, scales, PROPOSAL_DF, rng)
        log_ratios = -potential.values(drawn) - mixture_log_density(
            drawn, modes, weights, scales, PROPOSAL_DF
        )
        row = {"n": n + 1, "set": s, "modes": len(modes)}
        for count in (150, 100, 75):
            w, k = psis(log_ratios[:count])
            row[count] = {"k": k, "limit": khat_limit(count), "ess": float(1 / (w * w).sum())}
        out.append(row)
    return out


def exact_draws(n: int, seed: int, previous: dict | None = None, counts=(75, 50, 30)) -> dict:
    """A warm refit at ``n + 1`` labels (from ``previous``, the cold model at ``n``; None:
    refitted here): its screen's kept candidates scored exactly, with the accuracy estimates,
    on all its draws and on each ``count`` of them (every ``150 / count``-th draw, at each
    offset: disjoint sets that show the noise of so few): where each set's best stands in
    the ranking on all the draws, the estimates and the seconds of each pass."""
    import torch

    from fbgp_al.worker import fitting
    from fbgp_al.worker.acquisition import scorer
    from fbgp_al.worker.fitting.ranking import (
        accuracy_of,
        candidates_of,
        kept_count,
        screen_draws,
    )
    from fbgp_al.worker.scoring import Output, Scoring
    from fbgp_al.worker.vocabulary.pools import pool_of

    spec, labels, previous = _before_warm(n, seed, previous)
    sampled = fitting.sample(spec, labels, previous, 4000)
    data, thin, name = sampled.data, sampled.post.for_scoring(spec["mcmc"]), spec["acquisition"]
    pool = pool_of(spec)
    candidates, cand_u, _, _ = candidates_of(spec, pool, data.space, data.n, set(), [])
    fn = Scoring(name, (Output(1.0, thin, data.u, data.z, data.noise, data.seed),))
    rough = fn.with_draws(screen_draws(fn))(cand_u)
    kept = torch.argsort(rough, descending=True, stable=True)[: kept_count(fn)]
    estimates = ("loo_rmse", "loo_nlpd", "loo_coverage_95", "ipv", "qbc")

    def scored(rows):
        post = replace(thin, lengthscale=thin.lengthscale[rows], noise=thin.noise[rows])
        started = time.perf_counter()
        est, mean, var = accuracy_of(spec, pool, data, post, cand_u[kept])
        scores = scorer(name, post.noise)(mean, var).numpy()
        seconds = time.perf_counter() - started
        distinct = len(torch.unique(torch.cat([post.lengthscale, post.noise[:, None]], 1), dim=0))
        return np.argsort(-scores, kind="stable"), est, seconds, distinct

    every = len(thin.noise)
    full, est, seconds, distinct = scored(torch.arange(every))
    out = {"n": data.n, "draws": every, "kept": len(kept), "sets": []}
    out["sets"].append(
        {"count": every, "offset": 0, "distinct": distinct, "seconds": seconds, "best_at": 1}
        | {k: est[k] for k in estimates}
    )
    for count in counts:
        step = max(1, every // count)
        for offset in range(step):
            order, est, seconds, distinct = scored(torch.arange(offset, every, step))
            out["sets"].append(
                {"count": len(range(offset, every, step)), "offset": offset}
                | {"distinct": distinct, "seconds": seconds}
                | {"best_at": int(np.flatnonzero(full == order[0])[0]) + 1}
                | {k: est[k] for k in estimates}
            )
    return out


def measure(python: str, n: int, seed: int, threads: int | None = 1) -> dict:
    """:func:`one` in a process of its own, with ``python``, on ``threads`` threads (torch's,
    BLAS's, numba's: 1 is a worker's, ``fbgp-al worker``; None: the libraries' defaults)."""
    env = dict(os.environ)
    if threads is not None:
        env.update({variable: str(threads) for variable in THREAD_VARIABLES})
    out = subprocess.run(
        [python, "-m", "fbgp_al.clients.reproduction.scale_benchmark", "--one", str(n)]
        + ["--seed", str(seed)],
        check=True,
        capture_output=True,
        text=True,
        env=env,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def row(name: str, kind: str, r: dict, peak: float) -> str:
    accuracy = "-" if r["accuracy_s"] is None else f"{r['accuracy_s']:.1f}"
    distinct = "-" if r["distinct_draws"] is None else f"{r['distinct_draws']}/{r['draws']}"
    return (
        f"| {name} | {r['n']} | {kind} | {r['sampler']} | {r['posterior_s']:.1f} | "
        f"{r['evaluations']} | {distinct} | {accuracy} | {r['rank_s']:.1f} | "
        f"{r['refit_s']:.1f} | {peak:.2f} | {r.get('next', '-')} |"
    )


def add_trees(parser: argparse.ArgumentParser) -> None:
    """``--python NAME=PATH``: other trees' interpreters to measure beside this one."""
    parser.add_argument(
        "--python",
        action="append",
        default=[],
        metavar="NAME=PATH",
        help="another tree's interpreter to measure beside this one (repeatable)",
    )


def trees_of(args: argparse.Namespace) -> list[tuple[str, str]]:
    """The trees to measure, ``(name, interpreter)``: this one first, then ``--python``'s."""
    return [("this tree", sys.executable)] + [tuple(p.split("=", 1)) for p in args.python]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", default="1000,2000", help="labels, comma-separated")
    parser.add_argument("--seed", type=int, default=0, help="the data set's seed")
    add_trees(parser)
    parser.add_argument("--rounds", type=int, default=1, help="interleaved runs of each tree")
    parser.add_argument(
        "--threads",
        type=int,
        default=1,
        help="threads of each measured process (1: a worker's; 0: the libraries' defaults)",
    )
    parser.add_argument(
        "--modes",
        action="store_true",
        help="instead: the cold mode search on a subset against on every label, per size",
    )
    parser.add_argument(
        "--quality",
        action="store_true",
        help="instead: a warm refit's point and predictions against the full treatment",
    )
    parser.add_argument(
        "--khat",
        type=int,
        metavar="SETS",
        help="instead: the warm mixture's Pareto k over SETS sets of 150, 100 and 75 draws",
    )
    parser.add_argument(
        "--exact-draws",
        action="store_true",
        help="instead: a warm refit's exact scores and estimates on all its draws and on fewer",
    )
    parser.add_argument(
        "--previous",
        help="with --quality, --khat or --exact-draws: the cold model at the size (JSON)",
    )
    parser.add_argument("--one", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.quality or args.khat or args.exact_draws:
        previous = None
        if args.previous:
            with open(args.previous) as f:
                previous = json.load(f)
        for n in (int(s) for s in args.sizes.split(",")):
            if args.exact_draws:
                print(json.dumps(exact_draws(n, args.seed, previous)), flush=True)
            elif args.khat:
                for record in khat(n, args.seed, args.khat, previous):
                    print(json.dumps(record), flush=True)
            else:
                print(json.dumps(quality(n, args.seed, previous)), flush=True)
        return 0
    if args.modes:
        for n in (int(s) for s in args.sizes.split(",")):
            print(json.dumps({"n": n, "seed": args.seed, **modes(n, args.seed)}), flush=True)
        return 0
    if args.one is not None:
        print(json.dumps(one(args.one, args.seed)))
        return 0
    trees = trees_of(args)
    print(
        "| tree | n | refit | sampler | posterior (s) | evaluations | distinct draws | "
        "accuracy (s) | ranking (s) | refit (s) | peak memory (GB) | next point |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for n in (int(s) for s in args.sizes.split(",")):
        for _ in range(args.rounds):
            for name, python in trees:
                out = measure(python, n, args.seed, args.threads or None)
                for kind in ("cold", "warm"):
                    print(row(name, kind, out[kind], out["peak_gb"]), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
