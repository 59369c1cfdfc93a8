"""``fbgp-al bench-core --cases large|next|groups|metric``: refits at n = 100..400 of every
sampler side by side, the time to the next point, a refit's chain groups, and the mass matrix
(see :mod:`clients.reproduction.core_benchmark`)."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import torch

from fbgp_al.clients.reproduction.core_data import (
    agreement,
    campaign_data,
    data,
    fit,
    reference_posterior,
)
from fbgp_al.worker.acquisition import evaluate
from fbgp_al.worker.convergence import convergence
from fbgp_al.worker.mcmc import Target, sample_posterior
from fbgp_al.worker.transforms import OutputStandardization
from fbgp_al.worker.vocabulary.defaults import MCMC_DEFAULTS, MCMC_PRESETS, PAPER_ACQUISITIONS

LARGE_SIMULATORS = ("ishigami", "hartmann6")


LARGE_SIZES = (100, 200, 400)


SOURCES = ("uniform", "campaign")


# the paper's Pyro path; the service's fixed count before sampling to a target; the defaults;
# BoTorch's FullyBayesianSingleTaskGP with fit_fully_bayesian_model_nuts (NumPyro)
SAMPLERS = ("paper", "fixed", "default", "botorch")


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
        fit_fully_bayesian_model_nuts(
            gp, warmup_steps=warm, num_samples=draws, thinning=1, disable_progbar=True, seed=s
        )
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


def large_case(
    simulator: str, n: int, source: str, samplers, reference_draws: int, peer_max_n: int
) -> list[dict]:
    """Every sampler on one case: cold, and (for the service's) warm after a refit on the first
    ``n - 1`` points; printed as it goes."""
    u, z = campaign_data(simulator, n) if source == "campaign" else data(simulator, n)
    zp = OutputStandardization.from_labels(z.numpy()[:-1]).to_z(z.numpy()[:-1])
    case = f"{simulator} n={n} {source}"
    t = time.perf_counter()
    reference = long_reference(u, z, reference_draws)
    print(
        f"{case}: reference {len(reference)} draws in {time.perf_counter() - t:.1f} s", flush=True
    )
    rows = []

    def report(
        sampler,
        start,
        seconds,
        log_draws,
        scoring,
        chains,
        grads=None,
        per_chain=None,
        rhat_all=None,
        note="",
        compare=True,
    ):
        ess, rhat = scoring_convergence(scoring, chains)
        if rhat_all is None:
            rhat_all = scoring_convergence(log_draws, chains)[1]
        row = {
            "case": case,
            "sampler": sampler,
            "start": start,
            "seconds": seconds,
            "gradient_evaluations": grads,
            "draws_per_chain": per_chain,
            "ess": ess,
            "ess_per_s": ess / seconds,
            "rhat": rhat_all,
            "scoring_draws": len(scoring),
            "agreement_sd": agreement(log_draws, reference) if compare else None,
            "note": note,
        }
        rows.append(row)
        grads_text = f"{grads:6d}" if grads is not None else "     -"
        chain_text = f"{per_chain:5d}" if per_chain is not None else "    -"
        sd = f"{row['agreement_sd']:.2f} sd" if compare else "   -   "
        print(
            f"  {sampler:<8} {start:<5} {seconds:7.2f} s  grad evals {grads_text}  "
            f"draws/chain {chain_text}  ESS {ess:6.0f} of {len(scoring)}  "
            f"ESS/s {row['ess_per_s']:7.2f}  R-hat {rhat_all:.3f}  "
            f"quantiles {sd} {note}",
            flush=True,
        )

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
                report(
                    sampler,
                    start,
                    seconds,
                    post.log_draws().numpy(),
                    post.for_scoring(mcmc).log_draws().numpy(),
                    post.chains,
                    d["gradient_evaluations"],
                    d["samples_per_chain"],
                    d["max_rhat"],
                    note,
                )
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
            report(
                "botorch",
                "cold",
                seconds,
                draws,
                scoring,
                5,
                per_chain=300,
                compare=False,
                note=f"(its own model; compiling first: +{overhead:.1f} s)",
            )
    return rows


def large_cases(args) -> list[dict]:
    rows = []
    for simulator in args.simulators.split(","):
        for n in (int(v) for v in args.sizes.split(",")):
            for source in args.data.split(","):
                rows += large_case(
                    simulator,
                    n,
                    source,
                    args.samplers.split(","),
                    args.reference_draws,
                    args.peer_max_n,
                )
    return rows


def time_next_point(
    simulator: str,
    n: int,
    source: str,
    acquisitions=PAPER_ACQUISITIONS,
    candidates: int = 10_000,
    seed: int = 0,
) -> list[dict]:
    """Label to next point as a refit job runs it at ``n`` labels with the defaults: a warm refit
    (from one on the first ``n - 1`` labels, not timed), the 150 draws thinned for scoring,
    ``candidates`` uniform random candidates scored, and the model's accuracy estimates
    (:data:`worker.accuracy.POOL_POINTS` pool points). Each part is timed on its own; the total
    is that of one acquisition."""
    from fbgp_al.worker import accuracy

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
    print(
        f"{case}: warm refit {refit_s:.2f} s ({d['gradient_evaluations']} grad evals, "
        f"{d['samples_per_chain']} draws/chain, R-hat {d['max_rhat']:.3f}, min bulk ESS "
        f"{d['min_ess_bulk']:.0f}, target met: {d['target']['met']}), "
        f"accuracy {accuracy_s:.2f} s",
        flush=True,
    )
    rows = []
    for name in acquisitions:
        t = time.perf_counter()
        evaluate(name, thin, u, z, cand, seed=seed)
        scoring_s = time.perf_counter() - t
        total = refit_s + scoring_s + accuracy_s
        rows.append(
            {
                "case": case,
                "acquisition": name,
                "refit_s": refit_s,
                "scoring_s": scoring_s,
                "accuracy_s": accuracy_s,
                "total_s": total,
                "gradient_evaluations": d["gradient_evaluations"],
                "rhat": d["max_rhat"],
                "ess": d["min_ess_bulk"],
            }
        )
        print(
            f"  {name:<7} scoring {candidates} candidates {scoring_s:5.2f} s   label to next "
            f"point {total:5.2f} s",
            flush=True,
        )
    return rows


# the cases of --cases groups: the reproduction's points, where a refit at n = 100 takes seconds
GROUP_CASES = [("hartmann6", 100, "campaign"), ("ishigami", 100, "campaign")]


def _group_run(args) -> tuple[np.ndarray, int]:
    """One chain group of a refit in its own process (:func:`compare_groups`): its draws and
    gradient evaluations."""
    from redis import Redis

    from fbgp_al.service import jobs
    from fbgp_al.service.jobs import fanout
    from fbgp_al.service.store import CampaignStore
    from fbgp_al.worker import fitting

    spec, labels, ids, redis_url, token, warm = args
    torch.set_num_threads(1)
    data = fitting.prepare(spec, labels)
    steps = fitting.grouped(spec, data, ids, warm)
    if redis_url is None:
        draws, _ = fitting.alone(steps)
    else:
        store = CampaignStore(Redis.from_url(redis_url))
        peers = fanout.Peers(token, ids, spec["mcmc"]["chains"])
        draws, _ = jobs.judged(store, steps, peers)
    return draws.theta, draws.potential_calls


def compare_groups(cases=GROUP_CASES, seeds=3) -> list[dict]:
    """A refit with the defaults as one job (5 chains), and as two chain groups (chains 0-2 and
    3-4) run at once in two processes, each group sampling to its own share of the target (as
    before) or judging the target on all chains together (:class:`service.jobs.fanout.Peers`
    through a redis-server of its own): gradient evaluations of all groups, draws per chain kept
    by the merge, and whether the merged draws meet the target. Cold and warm (from a refit on the
    first ``n - 1`` labels). Counts: the load does not change them (the groups' interleaving
    does, a little)."""
    import multiprocessing
    import tempfile
    import uuid

    from fbgp_al.clients.ops.stack import free_port, start_redis
    from fbgp_al.worker import fitting

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
                            jobs = [
                                (spec, labels, ids, redis_url, token, warm)
                                for ids in ([0, 1, 2], [3, 4])
                            ]
                            results[how] = pool.map(_group_run, jobs)
                        for how, parts in results.items():
                            kept = min(theta.shape[1] for theta, _ in parts)
                            theta = np.concatenate([t[:, :kept] for t, _ in parts])
                            rhat, ess = convergence(theta)
                            met = target.met(
                                {"max_rhat": max(rhat.values()), "min_ess_bulk": min(ess.values())}
                            )
                            row = {
                                "case": f"{simulator} n={n} {source}",
                                "seed": seed,
                                "start": start,
                                "how": how,
                                "gradient_evaluations": sum(c for _, c in parts),
                                "longest_group": max(c for _, c in parts),
                                "lengths": [t.shape[1] for t, _ in parts],
                                "kept": kept,
                                "rhat": max(rhat.values()),
                                "ess": min(ess.values()),
                                "met": met,
                            }
                            rows.append(row)
                            print(
                                f"{row['case']} seed {seed} {start:<4} {how:<9}  grad evals "
                                f"{row['gradient_evaluations']:6d} (longest group "
                                f"{row['longest_group']:5d})  draws/chain "
                                f"{'/'.join(map(str, row['lengths'])):>9}  kept {kept:4d}  "
                                f"R-hat {row['rhat']:.3f}  ESS {row['ess']:5.0f}  "
                                f"target {'met' if met else 'NOT met'}",
                                flush=True,
                            )
        finally:
            pool.terminate()
            server.terminate()
            server.wait()
    return rows


METRIC_CASES = [
    ("ishigami", 100, "campaign"),
    ("hartmann6", 100, "campaign"),
    ("ishigami", 100, "uniform"),
    ("hartmann6", 100, "uniform"),
    ("hartmann6", 63, "campaign"),
    ("ishigami", 40, "campaign"),
]


def compare_metrics(cases=METRIC_CASES, seeds=4) -> None:
    """Diagonal against dense mass matrix: 5 chains x (200 + 300) cold, seeds ``0..seeds-1``;
    leapfrogs per draw, tree depth, gradient evaluations, bulk ESS (counts: the load does not
    change them) and the largest posterior correlation between two log-hyperparameters."""
    for simulator, n, source in cases:
        u, z = campaign_data(simulator, n) if source == "campaign" else data(simulator, n)
        for metric in ("diag", "dense"):
            runs = [
                sample_posterior(u, z, 5, 200, 300, seed=s, metric=metric).diagnostics
                for s in range(seeds)
            ]
            post = sample_posterior(u, z, 5, 200, 300, seed=seeds - 1, metric=metric)
            corr = np.corrcoef(post.log_draws().numpy().T)
            np.fill_diagonal(corr, 0.0)
            lf = [r["leapfrogs_per_draw"] for r in runs]
            ess = np.array([r["min_ess_bulk"] for r in runs])
            grads = np.array([r["gradient_evaluations"] for r in runs])
            print(
                f"{simulator} n={n} {source} {metric}: leapfrogs per draw {np.mean(lf):.2f}, "
                f"tree depth {np.mean([r['tree_depth_mean'] for r in runs]):.2f}, "
                f"gradient evaluations {grads.mean():.0f}, bulk ESS {ess.mean():.0f}, "
                f"ESS per 1000 gradient evaluations {1000 * np.mean(ess / grads):.1f}, "
                f"max |corr| {np.abs(corr).max():.2f}",
                flush=True,
            )
