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
import math
import os
import time
from pathlib import Path

import numpy as np
import torch

from clients.reproduction.protocol import pool_points
from clients.simulators import get_simulator
from worker.acquisition import evaluate
from worker.defaults import MCMC_DEFAULTS, MCMC_PRESETS, PAPER_ACQUISITIONS
from worker.gp import Conditioned, rbf
from worker.mcmc import Posterior, Target, convergence, sample_posterior
from worker.transforms import OutputStandardization

CASES = [("gramacy1d", n) for n in (10, 40, 100)] + [
    (name, n) for name in ("gramacy2d", "hartmann6") for n in (10, 40, 100)
]


def data(simulator: str, n: int, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """``n`` uniform random inputs of a simulator (unit cube) and standardized noisy outputs."""
    sim = get_simulator(simulator)
    rng = np.random.default_rng(seed)
    u = rng.random((n, sim.dim))
    y = sim.sample(sim.lower + u * (sim.upper - sim.lower), rng)
    return torch.from_numpy(u), OutputStandardization.from_labels(y).to_z(y)


RESULTS = Path(__file__).resolve().parents[2] / "docs" / "reproduction" / "results.jsonl"
# the reproduction's campaigns whose labels make a case's data, in this order (see campaign_data)
CAMPAIGN_ORDER = ("qb-mgp", "b-qbc", "bald", "b-alm", "alm")


def campaign_data(simulator: str, n: int, results=RESULTS) -> tuple[torch.Tensor, torch.Tensor]:
    """The first ``n`` points that the reproduction's campaigns of ``simulator`` labeled, with
    their labels (unit inputs, standardized outputs): those of its QB-MGP campaign of run 0 in
    the order they were chosen, then, past that campaign's length, the points of its other
    campaigns (run 0's B-QBC, BALD, B-ALM, ALM, then run 1's, ...) not labeled yet."""
    from clients.reproduction.results import labeled_points, read_results

    sim = get_simulator(simulator)
    records = [r for r in read_results(results) if r["simulator"] == simulator]
    runs = sorted({r["run"] for r in records})
    xs, ys, seen = [], [], set()
    for run in runs:
        for acquisition in CAMPAIGN_ORDER:
            x, y = labeled_points(records, simulator, acquisition, run)
            if y is None:
                continue
            for point, label in zip(x, y, strict=True):
                key = tuple(np.round(point, 12))
                if key not in seen:
                    seen.add(key)
                    xs.append(point)
                    ys.append(label)
            if len(xs) >= n:
                x, y = np.array(xs[:n]), np.array(ys[:n])
                z = OutputStandardization.from_labels(y).to_z(y)
                return torch.from_numpy(sim.to_unit(x)), z
    raise ValueError(f"the reproduction's {simulator} campaigns hold {len(xs)} points, not {n}")


def reference_posterior(u, z, chains=5, warmup=200, samples=300, seed=0) -> np.ndarray:
    """Log draws ``(chains * samples) x (d + 1)`` from the paper's path (Pyro GPRegression +
    NUTS), chains one after another."""
    import pyro
    import pyro.contrib.gp as gp
    import pyro.distributions as dist
    from pyro.infer import MCMC, NUTS

    d = u.shape[1]
    scale = torch.tensor(math.sqrt(3.0), dtype=torch.float64)
    zero = torch.zeros((), dtype=torch.float64)
    draws = []
    for chain in range(chains):
        pyro.clear_param_store()
        pyro.set_rng_seed(seed * 1000 + chain)
        kernel = gp.kernels.RBF(input_dim=d, variance=torch.tensor(1.0, dtype=torch.float64))
        kernel.lengthscale = pyro.nn.PyroSample(
            dist.LogNormal(zero.expand(d), scale.expand(d)).to_event(1)
        )
        kernel.variance = torch.tensor(1.0, dtype=torch.float64)  # fixed, as the service has it
        model = gp.models.GPRegression(u, z, kernel, noise=torch.tensor(0.1, dtype=torch.float64))
        model.noise = pyro.nn.PyroSample(dist.LogNormal(zero, scale))
        mcmc = MCMC(
            NUTS(model.model, target_accept_prob=0.8),
            num_samples=samples,
            warmup_steps=warmup,
            disable_progbar=True,
        )
        mcmc.run()
        s = mcmc.get_samples()
        lengthscale = s["kernel.lengthscale"].reshape(samples, d)
        draws.append(torch.cat([lengthscale.log(), s["noise"].reshape(samples, 1).log()], 1))
    return torch.cat(draws).numpy()


def agreement(ours: np.ndarray, reference: np.ndarray) -> float:
    """Largest |difference| of the 5/50/95% quantiles of any log-hyperparameter, in units of the
    reference posterior's sd."""
    q = [0.05, 0.5, 0.95]
    diff = np.abs(np.quantile(ours, q, axis=0) - np.quantile(reference, q, axis=0))
    return float((diff / reference.std(0)).max())


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
    from worker.acquisition import mixture_entropy

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
    out = {"cold_s": cold_s, "warm_s": warm_s, "ratio": cold_s / warm_s,
           "agreement_sd": agreement(warm.log_draws().numpy(), cold.log_draws().numpy()),
           "warm_start": warm.diagnostics["warm_start"]}  # fmt: skip
    print(f"{simulator} n={n}: cold refit {cold_s:.2f} s, warm {warm_s:.2f} s "
          f"({out['warm_start']}), ratio {out['ratio']:.2f}x, quantile diff "
          f"{out['agreement_sd']:.2f} sd", flush=True)  # fmt: skip
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
    from worker.potential import GPPotential

    potential = GPPotential(np.asarray(u), np.asarray(z))
    theta = np.array([(a, b) for a in np.linspace(-6, 2, 81) for b in np.linspace(-9, 1, 51)])
    energy = np.concatenate([potential(chunk)[0] for chunk in np.array_split(theta, 8)])
    short = theta[:, 0] < SHORT_MODE
    return float(energy[~short].min() - energy[short].min())


def chain_modes(n: int, datasets: int = 4, chains: int = 5, warmup: int = 200,
                samples: int = 300) -> dict:  # fmt: skip
    """For ``datasets`` random sets of ``n`` of Gramacy & Lee's pool points: per chain of each
    sampler, its median log lengthscale; totals of chains in the short-lengthscale mode."""
    totals = {"ours": 0, "reference": 0, "chains": 0}
    for seed in range(datasets):
        u, z = gramacy_data(n, seed)
        ours = sample_posterior(u, z, chains=chains, warmup=warmup, samples=samples, seed=seed,
                                init="uniform").lengthscale[:, 0].log().numpy()  # fmt: skip
        reference = reference_posterior(u, z, chains, warmup, samples, seed)[:, 0]
        row = {"ours": np.median(ours.reshape(chains, -1), axis=1),
               "reference": np.median(reference.reshape(chains, -1), axis=1)}  # fmt: skip
        for name in ("ours", "reference"):
            totals[name] += int((row[name] < SHORT_MODE).sum())
        totals["chains"] += chains
        print(f"n={n} data set {seed}: short mode more probable by {mode_gap(u, z):.1f} nats; "
              + "; ".join(f"{name}: " + " ".join(f"{v:+.2f}" for v in row[name])
                          for name in ("ours", "reference")), flush=True)  # fmt: skip
    print(
        f"chains in the short-lengthscale mode (log l < {SHORT_MODE}): ours {totals['ours']} "
        f"of {totals['chains']}, reference {totals['reference']} of {totals['chains']}"
    )
    return totals


# --- refits at the sizes real campaigns reach: every sampler on the same data, side by side ----

LARGE_SIMULATORS = ("ishigami", "hartmann6")
LARGE_SIZES = (100, 200, 400)
SOURCES = ("uniform", "campaign")
# the paper's Pyro path; the service's fixed count before sampling to a target; the defaults;
# BoTorch's FullyBayesianSingleTaskGP with fit_fully_bayesian_model_nuts (NumPyro)
SAMPLERS = ("paper", "fixed", "default", "botorch")


def fit(u, z, mcmc: dict, seed: int, warm: Posterior | None = None) -> Posterior:
    """A refit as the service runs it with campaign settings ``mcmc`` (warm from ``warm``)."""
    return sample_posterior(
        u, z, mcmc["chains"], mcmc["warmup"], mcmc["samples"], seed=seed,
        warm_start=warm.adaptation if warm is not None and mcmc.get("warm_start") else None,
        warm_warmup=mcmc.get("warm_warmup", 50), init=mcmc.get("init", "grid"),
        target=Target.of(mcmc), metric=mcmc.get("metric", "diag"),
        start_metric=mcmc.get("start_metric", False),
    )  # fmt: skip


def scoring_convergence(log_draws: np.ndarray, chains: int) -> tuple[float, float]:
    """Smallest bulk ESS and largest R-hat over the hyperparameters of draws ``S x P`` (chain
    after chain)."""
    rhat, ess = convergence(log_draws.reshape(chains, -1, log_draws.shape[1]))
    return min(ess.values()), max(rhat.values())


def botorch_posterior(u, z, chains, warmup, samples, seed=0) -> tuple[np.ndarray, float]:
    """Log draws (lengthscales, noise; chain after chain) of BoTorch's
    ``FullyBayesianSingleTaskGP`` (Matern-5/2, its own priors, a constant mean) fitted by
    ``fit_fully_bayesian_model_nuts`` (NumPyro's NUTS on JAX, dense mass matrix, tree depth at
    most 6, JAX's default precision), one chain per call as BoTorch runs it; and the seconds of
    a first 1 + 1 iteration fit, which compiles what the later calls reuse (JAX's cache)."""
    from botorch.fit import fit_fully_bayesian_model_nuts
    from botorch.models.fully_bayesian import FullyBayesianSingleTaskGP

    y = z.reshape(-1, 1)

    def one(s, warm, draws):
        gp = FullyBayesianSingleTaskGP(u, y)
        fit_fully_bayesian_model_nuts(gp, warmup_steps=warm, num_samples=draws, thinning=1,
                                      disable_progbar=True, seed=s)  # fmt: skip
        lengthscale = gp.covar_module.lengthscale.detach().reshape(draws, -1)
        noise = gp.likelihood.noise.detach().reshape(draws, 1)
        return torch.cat([lengthscale.log(), noise.log()], 1).numpy()

    t = time.perf_counter()
    one(seed, 1, 1)
    overhead = time.perf_counter() - t
    return np.concatenate([one(seed * 1000 + c, warmup, samples) for c in range(chains)]), overhead


def long_reference(u, z, draws: int, seed: int = 99) -> np.ndarray:
    """A long run of this project's sampler (checked against grid quadrature and Pyro in the
    tests): 4 chains x (500 + ``draws``), diagonal metric, chains from the posterior grid."""
    post = sample_posterior(u, z, chains=4, warmup=500, samples=draws, seed=seed, init="grid")
    return post.log_draws().numpy()


def large_case(simulator: str, n: int, source: str, samplers, reference_draws: int,
               peer_max_n: int) -> list[dict]:  # fmt: skip
    """Every sampler on one case: cold, and (for the service's) warm after a refit on the first
    ``n - 1`` points; printed as it goes."""
    u, z = campaign_data(simulator, n) if source == "campaign" else data(simulator, n)
    zp = OutputStandardization.from_labels(z.numpy()[:-1]).to_z(z.numpy()[:-1])
    case = f"{simulator} n={n} {source}"
    t = time.perf_counter()
    reference = long_reference(u, z, reference_draws)
    print(f"{case}: reference {len(reference)} draws in {time.perf_counter() - t:.1f} s",
          flush=True)  # fmt: skip
    rows = []

    def report(sampler, start, seconds, log_draws, scoring, chains, grads=None, per_chain=None,
               rhat_all=None, note="", compare=True):  # fmt: skip
        ess, rhat = scoring_convergence(scoring, chains)
        if rhat_all is None:
            rhat_all = scoring_convergence(log_draws, chains)[1]
        row = {"case": case, "sampler": sampler, "start": start, "seconds": seconds,
               "gradient_evaluations": grads, "draws_per_chain": per_chain, "ess": ess,
               "ess_per_s": ess / seconds, "rhat": rhat_all, "scoring_draws": len(scoring),
               "agreement_sd": agreement(log_draws, reference) if compare else None,
               "note": note}  # fmt: skip
        rows.append(row)
        grads_text = f"{grads:6d}" if grads is not None else "     -"
        chain_text = f"{per_chain:5d}" if per_chain is not None else "    -"
        sd = f"{row['agreement_sd']:.2f} sd" if compare else "   -   "
        print(f"  {sampler:<8} {start:<5} {seconds:7.2f} s  grad evals {grads_text}  "
              f"draws/chain {chain_text}  ESS {ess:6.0f} of {len(scoring)}  "
              f"ESS/s {row['ess_per_s']:7.2f}  R-hat {rhat_all:.3f}  "
              f"quantiles {sd} {note}", flush=True)  # fmt: skip

    presets = {"fixed": MCMC_PRESETS["fixed"], "default": MCMC_DEFAULTS}
    for sampler in samplers:
        if sampler in presets:
            mcmc = presets[sampler]
            starts = ["cold", "warm"] if mcmc.get("warm_start") else ["cold"]
            for start in starts:
                warm = fit(u[:-1], zp, mcmc, seed=1) if start == "warm" else None
                t = time.perf_counter()
                post = fit(u, z, mcmc, seed=2, warm=warm)
                seconds = time.perf_counter() - t
                d = post.diagnostics
                note = "" if start == "cold" else d["warm_start"]
                if "target" in d:
                    note += "" if d["target"]["met"] else " target not met (cap)"
                report(sampler, start, seconds, post.log_draws().numpy(),
                       post.for_scoring(mcmc).log_draws().numpy(), post.chains,
                       d["gradient_evaluations"], d["samples_per_chain"], d["max_rhat"],
                       note)  # fmt: skip
        elif sampler == "paper":
            if n > peer_max_n:
                print(f"  paper    skipped (n > --peer-max-n {peer_max_n})", flush=True)
                continue
            t = time.perf_counter()
            ref = reference_posterior(u, z, 5, 200, 300, seed=2)
            seconds = time.perf_counter() - t
            scoring = ref.reshape(5, 300, -1)[:, 9::10].reshape(150, -1)
            report("paper", "cold", seconds, ref, scoring, 5, per_chain=300)
        elif sampler == "botorch":
            if n > peer_max_n:
                print(f"  botorch  skipped (n > --peer-max-n {peer_max_n})", flush=True)
                continue
            t = time.perf_counter()
            draws, overhead = botorch_posterior(u, z, 5, 200, 300, seed=2)
            seconds = time.perf_counter() - t - overhead
            scoring = draws.reshape(5, 300, -1)[:, 9::10].reshape(150, -1)
            report("botorch", "cold", seconds, draws, scoring, 5, per_chain=300, compare=False,
                   note=f"(its own model; compiling first: +{overhead:.1f} s)")  # fmt: skip
    return rows


def large_cases(args) -> list[dict]:
    rows = []
    for simulator in args.simulators.split(","):
        for n in (int(v) for v in args.sizes.split(",")):
            for source in args.data.split(","):
                rows += large_case(simulator, n, source, args.samplers.split(","),
                                   args.reference_draws, args.peer_max_n)  # fmt: skip
    return rows


def time_next_point(simulator: str, n: int, source: str, acquisitions=PAPER_ACQUISITIONS,
                    candidates: int = 10_000, seed: int = 0) -> list[dict]:  # fmt: skip
    """Label to next point as a refit job runs it at ``n`` labels with the defaults: a warm refit
    (from one on the first ``n - 1`` labels, not timed), the 150 draws thinned for scoring,
    ``candidates`` uniform random candidates scored, and the model's accuracy estimates
    (:data:`worker.accuracy.POOL_POINTS` pool points). Each part is timed on its own; the total
    is that of one acquisition."""
    from worker import accuracy

    u, z = campaign_data(simulator, n) if source == "campaign" else data(simulator, n)
    zp = OutputStandardization.from_labels(z.numpy()[:-1]).to_z(z.numpy()[:-1])
    rng = np.random.default_rng(seed)
    cand = torch.from_numpy(rng.random((candidates, u.shape[1])))
    points = torch.from_numpy(rng.random((accuracy.POOL_POINTS, u.shape[1])))
    warm = fit(u[:-1], zp, MCMC_DEFAULTS, seed=1)
    t = time.perf_counter()
    post = fit(u, z, MCMC_DEFAULTS, seed=2, warm=warm)
    thin = post.for_scoring(MCMC_DEFAULTS)
    refit_s = time.perf_counter() - t
    t = time.perf_counter()
    accuracy.summary(u, z, thin.lengthscale, thin.noise, points, 1.0)
    accuracy_s = time.perf_counter() - t
    d = post.diagnostics
    case = f"{simulator} n={n} {source}"
    print(f"{case}: warm refit {refit_s:.2f} s ({d['gradient_evaluations']} grad evals, "
          f"{d['samples_per_chain']} draws/chain, R-hat {d['max_rhat']:.3f}, min bulk ESS "
          f"{d['min_ess_bulk']:.0f}, target met: {d['target']['met']}), "
          f"accuracy {accuracy_s:.2f} s",
          flush=True)  # fmt: skip
    rows = []
    for name in acquisitions:
        t = time.perf_counter()
        evaluate(name, thin, u, z, cand, seed=seed)
        scoring_s = time.perf_counter() - t
        total = refit_s + scoring_s + accuracy_s
        rows.append({"case": case, "acquisition": name, "refit_s": refit_s,
                     "scoring_s": scoring_s, "accuracy_s": accuracy_s, "total_s": total,
                     "gradient_evaluations": d["gradient_evaluations"],
                     "rhat": d["max_rhat"], "ess": d["min_ess_bulk"]})  # fmt: skip
        print(f"  {name:<7} scoring {candidates} candidates {scoring_s:5.2f} s   label to next "
              f"point {total:5.2f} s", flush=True)  # fmt: skip
    return rows


# the cases of --cases groups: the reproduction's points, where a refit at n = 100 takes seconds
GROUP_CASES = [("hartmann6", 100, "campaign"), ("ishigami", 100, "campaign")]


def _group_run(args) -> tuple[np.ndarray, int]:
    """One chain group of a refit in its own process (:func:`compare_groups`): its draws and
    gradient evaluations."""
    from redis import Redis

    from worker import fitting
    from worker.jobs import fanout

    spec, labels, ids, redis_url, token, warm = args
    torch.set_num_threads(1)
    data = fitting.prepare(spec, labels)
    peers = None
    if redis_url is not None:
        peers = fanout.Peers(Redis.from_url(redis_url), token, ids, spec["mcmc"]["chains"])
    draws, _ = fitting.chains(spec, data, ids, warm, peers=peers)
    return draws.theta, draws.potential_calls


def compare_groups(cases=GROUP_CASES, seeds=3) -> list[dict]:
    """A refit with the defaults as one job (5 chains), and as two chain groups (chains 0-2 and
    3-4) run at once in two processes, each group sampling to its own share of the target (as
    before) or judging the target on all chains together (:class:`worker.jobs.fanout.Peers`
    through a redis-server of its own): gradient evaluations of all groups, draws per chain kept
    by the merge, and whether the merged draws meet the target. Cold and warm (from a refit on the
    first ``n - 1`` labels). Counts: the load does not change them (the groups' interleaving
    does, a little)."""
    import multiprocessing
    import tempfile
    import uuid

    from clients.ops.stack import free_port, start_redis
    from worker import fitting

    target = Target.of(MCMC_DEFAULTS)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        port = free_port()
        server = start_redis(Path(tmp), port, Path(tmp) / "redis.log", password="bench")
        url = f"redis://:bench@127.0.0.1:{port}/0"
        pool = multiprocessing.get_context("fork").Pool(2)
        try:
            for simulator, n, source in cases:
                u, z = campaign_data(simulator, n) if source == "campaign" else data(simulator, n)
                inputs = [{"name": f"x{i}", "lower": 0.0, "upper": 1.0} for i in range(u.shape[1])]
                labels = [{"x": a.tolist(), "y": float(b)} for a, b in zip(u, z, strict=True)]
                for seed in range(seeds):
                    spec = {"inputs": inputs, "mcmc": dict(MCMC_DEFAULTS), "seed": seed}
                    before = fitting.prepare(spec, labels[:-1])
                    warm_from = fitting.posterior(spec, before, None).adaptation
                    for start, warm in (("cold", None), ("warm", warm_from)):
                        one = _group_run((spec, labels, list(range(5)), None, "", warm))
                        results = {"one job": [one]}
                        for how, redis_url in (("own share", None), ("together", url)):
                            token = uuid.uuid4().hex
                            jobs = [(spec, labels, ids, redis_url, token, warm)
                                    for ids in ([0, 1, 2], [3, 4])]  # fmt: skip
                            results[how] = pool.map(_group_run, jobs)
                        for how, parts in results.items():
                            kept = min(theta.shape[1] for theta, _ in parts)
                            theta = np.concatenate([t[:, :kept] for t, _ in parts])
                            rhat, ess = convergence(theta)
                            met = target.met({"max_rhat": max(rhat.values()),
                                              "min_ess_bulk": min(ess.values())})  # fmt: skip
                            row = {"case": f"{simulator} n={n} {source}", "seed": seed,
                                   "start": start, "how": how,
                                   "gradient_evaluations": sum(c for _, c in parts),
                                   "longest_group": max(c for _, c in parts),
                                   "lengths": [t.shape[1] for t, _ in parts], "kept": kept,
                                   "rhat": max(rhat.values()), "ess": min(ess.values()),
                                   "met": met}  # fmt: skip
                            rows.append(row)
                            print(f"{row['case']} seed {seed} {start:<4} {how:<9}  grad evals "
                                  f"{row['gradient_evaluations']:6d} (longest group "
                                  f"{row['longest_group']:5d})  draws/chain "
                                  f"{'/'.join(map(str, row['lengths'])):>9}  kept {kept:4d}  "
                                  f"R-hat {row['rhat']:.3f}  ESS {row['ess']:5.0f}  "
                                  f"target {'met' if met else 'NOT met'}", flush=True)  # fmt: skip
        finally:
            pool.terminate()
            server.terminate()
            server.wait()
    return rows


METRIC_CASES = [("ishigami", 100, "campaign"), ("hartmann6", 100, "campaign"),
                ("ishigami", 100, "uniform"), ("hartmann6", 100, "uniform"),
                ("hartmann6", 63, "campaign"), ("ishigami", 40, "campaign")]  # fmt: skip


def compare_metrics(cases=METRIC_CASES, seeds=4) -> None:
    """Diagonal against dense mass matrix: 5 chains x (200 + 300) cold, seeds ``0..seeds-1``;
    leapfrogs per draw, tree depth, gradient evaluations, bulk ESS (counts: the load does not
    change them) and the largest posterior correlation between two log-hyperparameters."""
    for simulator, n, source in cases:
        u, z = campaign_data(simulator, n) if source == "campaign" else data(simulator, n)
        for metric in ("diag", "dense"):
            runs = [sample_posterior(u, z, 5, 200, 300, seed=s, metric=metric).diagnostics
                    for s in range(seeds)]  # fmt: skip
            post = sample_posterior(u, z, 5, 200, 300, seed=seeds - 1, metric=metric)
            corr = np.corrcoef(post.log_draws().numpy().T)
            np.fill_diagonal(corr, 0.0)
            lf = [r["leapfrogs_per_draw"] for r in runs]
            ess = np.array([r["min_ess_bulk"] for r in runs])
            grads = np.array([r["gradient_evaluations"] for r in runs])
            print(f"{simulator} n={n} {source} {metric}: leapfrogs per draw {np.mean(lf):.2f}, "
                  f"tree depth {np.mean([r['tree_depth_mean'] for r in runs]):.2f}, "
                  f"gradient evaluations {grads.mean():.0f}, bulk ESS {ess.mean():.0f}, "
                  f"ESS per 1000 gradient evaluations {1000 * np.mean(ess / grads):.1f}, "
                  f"max |corr| {np.abs(corr).max():.2f}", flush=True)  # fmt: skip


def time_potential(sizes=(20, 40, 100, 200, 400), against: str | None = None) -> None:
    """Seconds per call of the potential on 5 chains' parameters, d = 3 and 6; ``against``: a
    file holding another ``GPPotential`` (an earlier version), timed in turn beside it."""
    import importlib.util

    from worker.potential import GPPotential

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
    parser = argparse.ArgumentParser(prog="fbgp-al bench-core", description=__doc__.split("\n")[0])
    parser.add_argument("--cases", default="all",
                        help="'all', 'target' (gramacy2d n=40), 'none', 'large': refits at "
                        "n = 100..400 of every sampler side by side (options below), 'metric': "
                        "diagonal against dense mass matrix, 'potential': seconds per "
                        "gradient evaluation (--against FILE: beside another version), 'next': "
                        "label to next point (warm refit, scoring, accuracy) at --simulators, "
                        "--sizes and --data, 'groups': a refit's two chain groups, each to its "
                        "own share of the target or to the target together")  # fmt: skip
    parser.add_argument("--against", help="potential: a file with another GPPotential")
    parser.add_argument("--simulators", default=",".join(LARGE_SIMULATORS),
                        help="large: simulators")  # fmt: skip
    parser.add_argument("--sizes", default=",".join(map(str, LARGE_SIZES)), help="large: n")
    parser.add_argument("--data", default=",".join(SOURCES),
                        help="large: uniform random inputs, and/or the points of the "
                        "reproduction's campaigns (docs/reproduction/results.jsonl)")  # fmt: skip
    parser.add_argument("--samplers", default="paper,fixed,default",
                        help=f"large: of {','.join(SAMPLERS)} (botorch needs botorch, jax and "
                        "numpyro importable: BENCHMARKS.md)")  # fmt: skip
    parser.add_argument("--peer-max-n", type=int, default=100,
                        help="large: run the peers (paper, botorch) only up to this n")  # fmt: skip
    parser.add_argument("--reference-draws", type=int, default=1000,
                        help="large: draws per chain of the long reference run")  # fmt: skip
    parser.add_argument("--no-reference", action="store_true", help="skip the Pyro reference path")
    parser.add_argument("--chains", type=int, default=5)
    parser.add_argument("--warmup", type=int, default=200)
    parser.add_argument("--samples", type=int, default=300)
    parser.add_argument("--modes", type=int, metavar="N",
                        help="only: where chains settle on Gramacy & Lee, N labels")  # fmt: skip
    parser.add_argument("--datasets", type=int, default=4, help="data sets for --modes")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    if args.modes is not None:
        chain_modes(args.modes, args.datasets, args.chains, args.warmup, args.samples)
        return
    cores = os.sched_getaffinity(0)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} thread, cores {sorted(cores)}")
    if args.cases in ("large", "metric", "potential", "next", "groups"):
        if args.cases == "large":
            large_cases(args)
        elif args.cases == "groups":
            compare_groups()
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
