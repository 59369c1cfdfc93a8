"""Speed of the computational core, measured side by side in one run on one core.

``fbgp-al bench-core`` times, on the same data:

- the paper's reference path: Pyro's NUTS over ``pyro.contrib.gp.models.GPRegression`` (RBF
  kernel with unit variance, LogNormal(0, sqrt(3)) priors on lengthscales and noise), the chains
  run one after another, float64;
- this project's :func:`worker.mcmc.sample_posterior` (chains in lockstep, analytic gradient);

and prints seconds, the ratio, and how well the two posteriors agree: for each log-hyperparameter,
the largest difference of the 5/50/95% quantiles in units of the reference posterior's sd. It also
times scoring: predictions and acquisitions for 10,000 candidates x 150 draws at n = 100, d = 6.

``--modes N`` instead asks where the chains of both samplers settle on Gramacy & Lee's two-mode
posterior: ``N`` of its pool points labeled, cold chains started uniformly in [-2, 2] as
Pyro starts them, a few data sets; it prints each chain's median log lengthscale, and how many
chains reached the short-lengthscale mode against how much more probable that mode is.
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np
import torch

from fbgp_al.clients.ops import described
from fbgp_al.clients.reproduction.core_data import agreement, data, reference_posterior
from fbgp_al.clients.reproduction.large_benchmark import (
    LARGE_SIMULATORS,
    LARGE_SIZES,
    SAMPLERS,
    SOURCES,
    compare_groups,
    compare_metrics,
    large_cases,
    time_next_point,
)
from fbgp_al.clients.reproduction.protocol import pool_points
from fbgp_al.clients.reproduction.screen_levers import (
    compare_reproduction_screening,
    compare_screening,
)
from fbgp_al.clients.reproduction.speed_levers import (
    LARGE_N_ARMS,
    compare_proposals,
    compare_stop_rules,
    compare_subset,
    time_cold_search,
)
from fbgp_al.clients.simulators import get_simulator
from fbgp_al.worker.acquisition import evaluate
from fbgp_al.worker.gp import Conditioned, rbf
from fbgp_al.worker.mcmc import Posterior, sample_posterior
from fbgp_al.worker.transforms import OutputStandardization
from fbgp_al.worker.vocabulary.defaults import PAPER_ACQUISITIONS

CASES = [("gramacy1d", n) for n in (10, 40, 100)] + [
    (name, n) for name in ("gramacy2d", "hartmann6") for n in (10, 40, 100)
]


def time_refits(cases, chains, warmup, samples, reference: bool) -> list[dict]:
    rows = []
    for simulator, n in cases:
        u, z = data(simulator, n)
        t = time.perf_counter()
        post = sample_posterior(u, z, chains=chains, warmup=warmup, samples=samples, seed=0)
        ours = time.perf_counter() - t
        row = {"case": f"{simulator} n={n}", "ours_s": ours, "diag": post.diagnostics}
        if reference:
            t = time.perf_counter()
            ref = reference_posterior(u, z, chains, warmup, samples)
            row["reference_s"] = time.perf_counter() - t
            row["speedup"] = row["reference_s"] / ours
            row["agreement_sd"] = agreement(post.log_draws().numpy(), ref)
        rows.append(row)
        _print_row(row)
    return rows


def _print_row(row: dict) -> None:
    d = row["diag"]
    text = (
        f"{row['case']:<16} ours {row['ours_s']:6.2f} s  (grad evals {d['gradient_evaluations']}, "
        f"R-hat {d['max_rhat']:.3f}, ESS {d['min_ess_bulk']:.0f}, div {d['divergences']})"
    )
    if "reference_s" in row:
        text += (
            f"  reference {row['reference_s']:7.2f} s  ratio {row['speedup']:5.1f}x"
            f"  quantile diff {row['agreement_sd']:.2f} sd"
        )
    print(text, flush=True)


def time_scoring(n=100, d=6, draws=150, candidates=10_000, seed=0) -> dict:
    """Seconds to score ``candidates`` with each acquisition from ``draws`` posterior draws."""
    rng = np.random.default_rng(seed)
    u = torch.from_numpy(rng.random((n, d)))
    z = torch.from_numpy(rng.standard_normal(n))
    post = Posterior(
        lengthscale=torch.from_numpy(np.exp(rng.normal(-0.5, 0.3, (draws, d)))),
        noise=torch.from_numpy(np.exp(rng.normal(-4, 0.5, draws))),
        chains=1,
        mode_lengthscale=torch.full((d,), 0.6, dtype=torch.float64),
        mode_noise=0.02,
    )
    cand = torch.from_numpy(rng.random((candidates, d)))
    out = {}
    for name in PAPER_ACQUISITIONS:
        t = time.perf_counter()
        evaluate(name, post, u, z, cand)
        out[name] = time.perf_counter() - t
    print(
        f"scoring {candidates} candidates x {draws} draws, n={n}, d={d}: "
        + ", ".join(f"{k} {v:.2f} s" for k, v in out.items()),
        flush=True,
    )
    # where a prediction's time goes: each part on one chunk, scaled to all candidates
    from fbgp_al.worker.acquisition import mixture_entropy

    gp = Conditioned.fit(u, z, post.lengthscale, post.noise)
    chunk = cand[: gp.chunk_size()]
    scale = candidates / len(chunk)
    k_star = rbf(u, chunk, post.lengthscale)
    v = gp.chol_inv @ k_star
    chol = torch.linalg.inv(gp.chol_inv).tril_()
    mean, var = gp.predict_chunk(chunk)
    parts = {
        "kernel": lambda: rbf(u, chunk, post.lengthscale),
        "variance product": lambda: gp.chol_inv @ k_star,
        "(as a triangular solve)": lambda: torch.linalg.solve_triangular(chol, k_star, upper=False),
        "sum of squares": lambda: (v * v).sum(-2),
        "mean": lambda: gp.alpha[:, None, :] @ k_star,
        "bald's quadrature": lambda: mixture_entropy(mean, var),
    }
    shares = {}
    for name, part in parts.items():
        t = time.perf_counter()
        for _ in range(5):
            part()
        shares[name] = (time.perf_counter() - t) / 5 * scale
    print("  of which: " + ", ".join(f"{k} {v:.2f} s" for k, v in shares.items()), flush=True)
    return out


def time_warm_start(simulator="gramacy2d", n=40, chains=5, warmup=200, samples=300) -> dict:
    """A refit after one more label, cold and warm-started from the refit before it."""
    u, z = data(simulator, n)
    previous = sample_posterior(u[:-1], z[:-1], chains, warmup, samples, seed=1)
    t = time.perf_counter()
    cold = sample_posterior(u, z, chains, warmup, samples, seed=2)
    cold_s = time.perf_counter() - t
    t = time.perf_counter()
    warm = sample_posterior(u, z, chains, warmup, samples, seed=2, warm_start=previous.adaptation)
    warm_s = time.perf_counter() - t
    out = {
        "cold_s": cold_s,
        "warm_s": warm_s,
        "ratio": cold_s / warm_s,
        "agreement_sd": agreement(warm.log_draws().numpy(), cold.log_draws().numpy()),
        "warm_start": warm.diagnostics["warm_start"],
    }
    print(
        f"{simulator} n={n}: cold refit {cold_s:.2f} s, warm {warm_s:.2f} s "
        f"({out['warm_start']}), ratio {out['ratio']:.2f}x, quantile diff "
        f"{out['agreement_sd']:.2f} sd",
        flush=True,
    )
    return out


SHORT_MODE = -2.5  # log lengthscale (unit inputs) between Gramacy & Lee's two modes


def gramacy_data(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``n`` distinct points of Gramacy & Lee's pool (unit inputs) with standardized labels."""
    sim = get_simulator("gramacy1d")
    grid = pool_points(sim, np.arange(sim.pool_size))
    rng = np.random.default_rng(seed)
    x = grid[np.sort(rng.choice(len(grid), n, replace=False))]
    y = sim.sample(x, rng)
    return torch.from_numpy(
        (x - sim.lower) / (sim.upper - sim.lower)
    ), OutputStandardization.from_labels(y).to_z(y)


def mode_gap(u, z) -> float:
    """How much more probable (nats) the best short-lengthscale hyperparameters are than the
    best long-lengthscale ones, on a grid of the 1-D posterior."""
    from fbgp_al.worker.potential import GPPotential

    potential = GPPotential(np.asarray(u), np.asarray(z))
    theta = np.array([(a, b) for a in np.linspace(-6, 2, 81) for b in np.linspace(-9, 1, 51)])
    energy = np.concatenate([potential(chunk)[0] for chunk in np.array_split(theta, 8)])
    short = theta[:, 0] < SHORT_MODE
    return float(energy[~short].min() - energy[short].min())


def chain_modes(
    n: int, datasets: int = 4, chains: int = 5, warmup: int = 200, samples: int = 300
) -> dict:
    """For ``datasets`` random sets of ``n`` of Gramacy & Lee's pool points: per chain of each
    sampler, its median log lengthscale; totals of chains in the short-lengthscale mode."""
    totals = {"ours": 0, "reference": 0, "chains": 0}
    for seed in range(datasets):
        u, z = gramacy_data(n, seed)
        ours = (
            sample_posterior(
                u, z, chains=chains, warmup=warmup, samples=samples, seed=seed, init="uniform"
            )
            .lengthscale[:, 0]
            .log()
            .numpy()
        )
        reference = reference_posterior(u, z, chains, warmup, samples, seed)[:, 0]
        row = {
            "ours": np.median(ours.reshape(chains, -1), axis=1),
            "reference": np.median(reference.reshape(chains, -1), axis=1),
        }
        for name in ("ours", "reference"):
            totals[name] += int((row[name] < SHORT_MODE).sum())
        totals["chains"] += chains
        print(
            f"n={n} data set {seed}: short mode more probable by {mode_gap(u, z):.1f} nats; "
            + "; ".join(
                f"{name}: " + " ".join(f"{v:+.2f}" for v in row[name])
                for name in ("ours", "reference")
            ),
            flush=True,
        )
    print(
        f"chains in the short-lengthscale mode (log l < {SHORT_MODE}): ours {totals['ours']} "
        f"of {totals['chains']}, reference {totals['reference']} of {totals['chains']}"
    )
    return totals


def time_potential(sizes=(20, 40, 100, 200, 400), against: str | None = None) -> None:
    """Seconds per call of the potential on 5 chains' parameters, d = 3 and 6; ``against``: a
    file holding another ``GPPotential`` (an earlier version), timed in turn beside it."""
    import importlib.util

    from fbgp_al.worker.potential import GPPotential

    other = None
    if against:
        spec = importlib.util.spec_from_file_location("other_potential", against)
        other = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(other)
    rng = np.random.default_rng(0)
    for n in sizes:
        for d in (3, 6):
            u, z = rng.random((n, d)), rng.standard_normal(n)
            theta = np.column_stack([rng.normal(-0.5, 0.2, (5, d)), rng.normal(-3, 0.2, 5)])
            calls = max(5, int(3e8 / (5 * n**3)))
            timed = {"this": GPPotential(u, z)}
            if other is not None:
                timed["against"] = other.GPPotential(u, z)
            out = {}
            for _ in range(2):  # alternate, twice
                for name, potential in timed.items():
                    potential(theta)
                    t = time.perf_counter()
                    for _ in range(calls):
                        potential(theta)
                    out[name] = (time.perf_counter() - t) / calls * 1e3
            text = ", ".join(f"{k} {v:.3f} ms" for k, v in out.items())
            if other is not None:
                text += f", ratio {out['against'] / out['this']:.2f}x"
            print(f"potential n={n} d={d}, 5 chains: {text}", flush=True)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(prog="fbgp-al bench-core", description=described(__doc__))
    parser.add_argument(
        "--cases",
        default="all",
        help="'all', 'target' (gramacy2d n=40), 'none', 'large': refits at "
        "n = 100..400 of every sampler side by side (options below), 'metric': "
        "diagonal against dense mass matrix, 'potential': seconds per "
        "gradient evaluation (--against FILE: beside another version), 'next': "
        "label to next point (warm refit, scoring, accuracy) at --simulators, "
        "--sizes and --data, 'groups': a refit's two chain groups, each to its "
        "own share of the target or to the target together, 'stop': when "
        "sampling stops (R-hat waited for or reported only), the refit's time "
        "and its next point against a long run's, at --simulators, --sizes "
        "and --data; 'screen': each acquisition's scoring in full and screened, at "
        "--simulators, --sizes and --data; 'repro-screen': the same on the "
        "reproduction's stored campaigns of --simulators (ishigami), at --sizes "
        "labels, --seeds as its runs (0,1,2); 'subset': the hyperparameters "
        "sampled by NUTS on all labels and on 200 of them, and drawn from the "
        "Laplace mixture (cold, warm from n - 1 labels, and warm with the cold "
        "search a doubling brings), each conditioned "
        "on all, at --simulators, --sizes and --arms; 'proposals': the Laplace "
        "mixture's proposal (Gaussian or Student-t, draws weighed), its Pareto k "
        "over --seeds (0..7); 'search': the cold search for modes, its candidates "
        "ranked by values alone and by the gradient call, at --simulators "
        "and --sizes",
    )
    parser.add_argument("--against", help="potential: a file with another GPPotential")
    parser.add_argument(
        "--simulators", default=",".join(LARGE_SIMULATORS), help="large: simulators"
    )
    parser.add_argument("--sizes", default=",".join(map(str, LARGE_SIZES)), help="large: n")
    parser.add_argument(
        "--data",
        default=",".join(SOURCES),
        help="large: uniform random inputs, and/or the points of the "
        "reproduction's campaigns (docs/reproduction/results.jsonl)",
    )
    parser.add_argument(
        "--samplers",
        default="paper,fixed,default",
        help=f"large: of {','.join(SAMPLERS)} (botorch needs botorch, jax and "
        "numpyro importable: docs/benchmarks.md)",
    )
    parser.add_argument(
        "--peer-max-n",
        type=int,
        default=100,
        help="large: run the peers (paper, botorch) only up to this n",
    )
    parser.add_argument(
        "--reference-draws",
        type=int,
        default=1000,
        help="large: draws per chain of the long reference run",
    )
    parser.add_argument("--no-reference", action="store_true", help="skip the Pyro reference path")
    parser.add_argument("--chains", type=int, default=5)
    parser.add_argument("--warmup", type=int, default=200)
    parser.add_argument("--samples", type=int, default=300)
    parser.add_argument(
        "--modes",
        type=int,
        metavar="N",
        help="only: where chains settle on Gramacy & Lee, N labels",
    )
    parser.add_argument("--datasets", type=int, default=4, help="data sets for --modes")
    parser.add_argument(
        "--arms",
        default=",".join(LARGE_N_ARMS),
        help="subset: of all,subset,laplace,laplace-warm,laplace-search",
    )
    parser.add_argument(
        "--seeds",
        default=None,
        metavar="S,S,..",
        help="stop, screen, subset, proposals: the seeds (0,1,2; subset 0,1; proposals 0..7)",
    )
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    if args.modes is not None:
        chain_modes(args.modes, args.datasets, args.chains, args.warmup, args.samples)
        return
    cores = os.sched_getaffinity(0)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} thread, cores {sorted(cores)}")
    seeds = {} if args.seeds is None else {"seeds": tuple(int(v) for v in args.seeds.split(","))}
    if args.cases in (
        "large",
        "metric",
        "potential",
        "next",
        "groups",
        "stop",
        "screen",
        "subset",
        "proposals",
        "repro-screen",
        "search",
    ):
        if args.cases == "large":
            large_cases(args)
        elif args.cases == "groups":
            compare_groups()
        elif args.cases == "proposals":
            for simulator in args.simulators.split(","):
                for n in (int(v) for v in args.sizes.split(",")):
                    compare_proposals(simulator, n, **seeds)
        elif args.cases == "search":
            for simulator in args.simulators.split(","):
                time_cold_search(simulator, [int(v) for v in args.sizes.split(",")])
        elif args.cases == "repro-screen":
            runs = seeds.get("seeds", (0, 1, 2))
            for simulator in args.simulators.split(","):
                sizes = [int(v) for v in args.sizes.split(",")]
                compare_reproduction_screening(simulator, sizes, runs=runs)
        elif args.cases == "subset":
            for simulator in args.simulators.split(","):
                for n in (int(v) for v in args.sizes.split(",")):
                    compare_subset(simulator, n, arms=tuple(args.arms.split(",")), **seeds)
        elif args.cases in ("stop", "screen"):
            compare = compare_stop_rules if args.cases == "stop" else compare_screening
            for simulator in args.simulators.split(","):
                for n in (int(v) for v in args.sizes.split(",")):
                    for source in args.data.split(","):
                        compare(simulator, n, source, **seeds)
        elif args.cases == "next":
            for simulator in args.simulators.split(","):
                for n in (int(v) for v in args.sizes.split(",")):
                    for source in args.data.split(","):
                        time_next_point(simulator, n, source)
        elif args.cases == "metric":
            compare_metrics()
        else:
            time_potential(against=args.against)
        return
    cases = {"all": CASES, "target": [("gramacy2d", 40)], "none": []}[args.cases]
    time_refits(cases, args.chains, args.warmup, args.samples, not args.no_reference)
    time_warm_start()
    time_scoring()
