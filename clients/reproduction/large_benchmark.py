"""``fbgp-al bench-core --cases large|next|groups|metric``: refits at n = 100..400 of every
sampler side by side, the time to the next point, a refit's chain groups, and the mass matrix
(see :mod:`clients.reproduction.core_benchmark`)."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import torch

from clients.reproduction.core_data import agreement, campaign_data, data, fit, reference_posterior
from clients.simulators import get_simulator
from worker.acquisition import DrawGPs, evaluate
from worker.convergence import convergence
from worker.mcmc import Posterior, Target, sample_posterior
from worker.spec.defaults import MCMC_DEFAULTS, MCMC_PRESETS, PAPER_ACQUISITIONS
from worker.transforms import OutputStandardization

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


# the stop rules of --cases stop: R-hat waited for (1.01), R-hat reported only, and that with a
# shorter step-size warm-up of a warm start
STOP_RULES = {"rhat": {**MCMC_DEFAULTS, "target_rhat": 1.01},
              "ess": {**MCMC_DEFAULTS, "target_rhat": None},
              "ess-w20": {**MCMC_DEFAULTS, "target_rhat": None, "warm_warmup": 20}}  # fmt: skip


def _ranking_against(scores: np.ndarray, reference: np.ndarray, k: int = 10) -> dict:
    """How a ranking's ``scores`` agree with the ``reference`` scores of the same candidates:
    the reference's rank of the point chosen (0: the reference's best), the overlap of the two
    top-``k``, and the reference's score of the point chosen relative to its best."""
    order = np.argsort(-reference, kind="stable")
    where = np.empty_like(order)
    where[order] = np.arange(len(order))
    chosen = int(np.argmax(scores))
    top = set(np.argsort(-scores, kind="stable")[:k].tolist())
    return {"rank": int(where[chosen]), "overlap": len(top & set(order[:k].tolist())) / k,
            "relative": float(reference[chosen] / reference[order[0]])}  # fmt: skip


def compare_stop_rules(simulator: str, n: int, source: str, seeds=(0, 1, 2),
                       candidates: int = 10_000, acquisition: str = "qb-mgp",
                       reference_draws: int = 600) -> list[dict]:  # fmt: skip
    """When sampling stops (issue 40's first lever): a warm refit at ``n`` labels (from one on
    the first ``n - 1``) with each of :data:`STOP_RULES`, per seed, timed, and its next point
    (``acquisition`` over ``candidates`` seeded uniform candidates) against a long reference run's
    (5 chains x ``reference_draws``, 600 draws of them scored): the reference's rank of the point
    chosen, the top-10 overlap, the reference's score of it relative to its best. Two seeds of
    one rule disagree with each other by the noise of the draws; a rule is as good as another
    when its agreement with the reference is within that noise."""
    u, z = campaign_data(simulator, n) if source == "campaign" else data(simulator, n)
    zp = OutputStandardization.from_labels(z.numpy()[:-1]).to_z(z.numpy()[:-1])
    cand = torch.from_numpy(np.random.default_rng(0).random((candidates, u.shape[1])))
    case = f"{simulator} n={n} {source}"
    t = time.perf_counter()
    ref = sample_posterior(u, z, chains=5, warmup=300, samples=reference_draws, seed=99,
                           init="grid", start_metric=True)  # fmt: skip
    reference = evaluate(acquisition, ref.spread(600), u, z, cand).numpy()
    print(f"{case}: reference 5 x {reference_draws} draws (R-hat "
          f"{ref.diagnostics['max_rhat']:.3f}, ESS {ref.diagnostics['min_ess_bulk']:.0f}) "
          f"and its scores in {time.perf_counter() - t:.1f} s", flush=True)  # fmt: skip
    rows, chosen = [], {}
    for seed in seeds:
        warm = fit(u[:-1], zp, STOP_RULES["rhat"], seed=10 + seed)  # one start for every rule
        for rule, mcmc in STOP_RULES.items():
            t = time.perf_counter()
            post = fit(u, z, mcmc, seed=20 + seed, warm=warm)
            refit_s = time.perf_counter() - t
            t = time.perf_counter()
            scores = evaluate(acquisition, post.for_scoring(mcmc), u, z, cand).numpy()
            scoring_s = time.perf_counter() - t
            d = post.diagnostics
            row = {"case": case, "rule": rule, "seed": seed, "refit_s": refit_s,
                   "scoring_s": scoring_s, "gradient_evaluations": d["gradient_evaluations"],
                   "draws_per_chain": d["samples_per_chain"], "rhat": d["max_rhat"],
                   "ess": d["min_ess_bulk"], "start": d["warm_start"],
                   **_ranking_against(scores, reference)}  # fmt: skip
            chosen.setdefault(rule, []).append(scores)
            rows.append(row)
            print(f"  {rule:<7} seed {seed}: refit {refit_s:6.2f} s ({row['gradient_evaluations']}"
                  f" grad evals, {row['draws_per_chain']} draws/chain, R-hat {row['rhat']:.3f}, "
                  f"ESS {row['ess']:.0f}, {row['start']}), scoring {scoring_s:.2f} s; next point:"
                  f" reference rank {row['rank']}, top-10 overlap {row['overlap']:.1f}, "
                  f"reference score {row['relative']:.3f} of its best", flush=True)  # fmt: skip
    for rule, runs in chosen.items():  # the noise of the draws: seed against seed, one rule
        pairs = [_ranking_against(a, b) for i, a in enumerate(runs) for b in runs[i + 1 :]]
        print(f"  {rule:<7} seed against seed: ranks {[p['rank'] for p in pairs]}, top-10 "
              f"overlap {[p['overlap'] for p in pairs]}", flush=True)  # fmt: skip
    for rule in STOP_RULES:
        mine = [r for r in rows if r["rule"] == rule]
        print(
            f"  {rule:<4} median refit {np.median([r['refit_s'] for r in mine]):.2f} s, "
            f"median reference rank {np.median([r['rank'] for r in mine]):.0f}, "
            f"median overlap {np.median([r['overlap'] for r in mine]):.2f}",
            flush=True,
        )
    return rows


def compare_screening(simulator: str, n: int, source: str, seeds=(0, 1, 2),
                      acquisitions=("qb-mgp", "b-alm", "bald"),
                      candidates: int = 10_000) -> list[dict]:  # fmt: skip
    """What scoring costs (issue 40's second lever): each acquisition's ranking of
    ``candidates`` seeded uniform candidates by the defaults' refit at ``n`` labels, scored in
    full and screened (:func:`worker.fitting.ranking.scored`, forced on), side by side: the
    seconds of each, whether the point chosen is the same, and the overlap of the two kept
    rankings (their ``RANKING_SIZE`` best)."""
    from worker.fitting import ranking
    from worker.scoring import Output, Scoring
    from worker.spec.defaults import RANKING_SIZE

    u, z = campaign_data(simulator, n) if source == "campaign" else data(simulator, n)
    case = f"{simulator} n={n} {source}"
    rows = []
    for seed in seeds:
        post = fit(u, z, MCMC_DEFAULTS, seed=30 + seed)
        thin = post.for_scoring(MCMC_DEFAULTS)
        cand = torch.from_numpy(np.random.default_rng(seed).random((candidates, u.shape[1])))
        for name in acquisitions:
            fn = Scoring(name, (Output(1.0, thin, u, z, None, seed),))
            t = time.perf_counter()
            full = ranking.here(fn, cand).numpy()
            full_s = time.perf_counter() - t
            saved = ranking.SCREEN_WORK
            ranking.SCREEN_WORK = 0  # screen whatever the size
            try:
                t = time.perf_counter()
                screened = ranking.scored(name, fn, cand, ranking.here).numpy()
                screened_s = time.perf_counter() - t
            finally:
                ranking.SCREEN_WORK = saved
            best_full = np.argsort(-full, kind="stable")[:RANKING_SIZE]
            best_screened = np.argsort(-screened, kind="stable")[:RANKING_SIZE]
            row = {"case": case, "seed": seed, "acquisition": name, "full_s": full_s,
                   "screened_s": screened_s, "same_point": bool(best_full[0] == best_screened[0]),
                   "overlap": len(set(best_full) & set(best_screened)) / RANKING_SIZE,
                   "exact_where_kept": bool(np.allclose(full[np.isfinite(screened)],
                                                        screened[np.isfinite(screened)],
                                                        rtol=1e-9, atol=0))}  # fmt: skip
            rows.append(row)
            print(f"{case} seed {seed} {name:<6}: full {full_s:5.2f} s, screened "
                  f"{screened_s:5.2f} s ({full_s / screened_s:.1f}x); same point: "
                  f"{row['same_point']}, top-{RANKING_SIZE} overlap {row['overlap']:.2f}, "
                  f"exact where kept: {row['exact_where_kept']}", flush=True)  # fmt: skip
    return rows


def laplace_posterior(u, z, seed: int, draws: int = 150) -> Posterior:
    """``draws`` draws of the hyperparameters from the Laplace mixture that cold chains start
    from (:mod:`worker.cold_start`: the posterior's local modes found by a grid and L-BFGS, each
    a Gaussian with its Hessian's inverse, weighed by its Laplace mass), on all the labels; its
    diagnostics say how many modes and gradient evaluations it took."""
    from worker.cold_start import _start_modes
    from worker.potential import GPPotential

    d = u.shape[1]
    floor = MCMC_DEFAULTS["noise_floor"]
    potential = GPPotential(u, z, None, None, floor)
    modes, weights, scales = _start_modes(potential, seed)
    rng = np.random.default_rng(seed)
    k = rng.choice(len(modes), draws, p=weights)
    theta = modes[k] + np.einsum("bij,bj->bi", scales[k], rng.standard_normal((draws, d + 1)))
    best = modes[int(np.argmax(weights))]
    post = Posterior(lengthscale=torch.from_numpy(np.exp(theta[:, :d])),
                     noise=torch.from_numpy(floor + np.exp(theta[:, d])), chains=1,
                     mode_lengthscale=torch.from_numpy(np.exp(best[:d])),
                     mode_noise=float(floor + np.exp(best[d])))  # fmt: skip
    post.diagnostics = {"samples_per_chain": draws, "max_rhat": float("nan"),
                        "min_ess_bulk": float(draws), "modes": len(modes)}  # fmt: skip
    return post


def compare_subset(simulator: str, n: int, subset: int = 200, seeds=(0, 1),
                   candidates: int = 10_000, test_points: int = 2_000) -> list[dict]:  # fmt: skip
    """Large n (issue 40's fourth lever), before choosing: the hyperparameters sampled by the
    defaults on all ``n`` labels, on a seeded ``subset`` of them, and drawn from the Laplace
    mixture at the modes of all of them (:func:`laplace_posterior`), each posterior's 150 draws
    then conditioned on all ``n`` labels. Side by side: the sampling's seconds, the draws'
    medians of the log lengthscales and log noise, the mixture's RMSE against the noise-free
    function and NLPD of noisy labels at ``test_points`` uniform points (original units), and
    the next point (QB-MGP, screened, over ``candidates``): whether the two choose the same,
    and the full posterior's score of the subset's choice relative to its best."""
    from worker.fitting import ranking
    from worker.scoring import Output, Scoring

    sim = get_simulator(simulator)
    rng = np.random.default_rng(0)
    unit = rng.random((n, sim.dim))
    y = sim.sample(sim.lower + unit * (sim.upper - sim.lower), rng)
    scale = OutputStandardization.from_labels(y)
    u, z = torch.from_numpy(unit), scale.to_z(y)
    test = rng.random((test_points, sim.dim))
    x_test = sim.lower + test * (sim.upper - sim.lower)
    truth, noisy = sim.mean(x_test), sim.sample(x_test, rng)
    cand = torch.from_numpy(rng.random((candidates, sim.dim)))
    case = f"{simulator} n={n} uniform, subset {subset}"
    rows = []
    for seed in seeds:
        chosen = {}
        for how in ("all", "subset", "laplace"):
            keep = (np.sort(np.random.default_rng([seed, 5]).choice(n, subset, replace=False))
                    if how == "subset" else np.arange(n))  # fmt: skip
            t = time.perf_counter()
            post = (laplace_posterior(u, z, seed) if how == "laplace" else
                    fit(u[keep], z[keep], MCMC_DEFAULTS, seed=40 + seed))  # fmt: skip
            seconds = time.perf_counter() - t
            thin = post.for_scoring(MCMC_DEFAULTS)
            means, variances = [], []
            for m, v in DrawGPs(u, z, thin.lengthscale, thin.noise).chunks(torch.from_numpy(test)):
                means.append(m)
                variances.append(v)
            m, v = torch.cat(means, 1).numpy(), torch.cat(variances, 1).numpy()
            m, v = scale.mean + scale.std * m, v * scale.std**2  # original units
            rmse = float(np.sqrt(np.mean((m.mean(0) - truth) ** 2)))
            density = np.exp(-0.5 * (noisy - m) ** 2 / v) / np.sqrt(2 * np.pi * v)
            nlpd = float(-np.log(density.mean(0)).mean())
            fn = Scoring("qb-mgp", (Output(1.0, thin, u, z, None, seed),))
            scores = ranking.scored("qb-mgp", fn, cand, ranking.here).numpy()
            chosen[how] = (int(np.argmax(scores)), thin)
            logs = post.log_draws().numpy()
            d = post.diagnostics
            row = {"case": case, "seed": seed, "how": how, "seconds": seconds,
                   "median_log_draws": np.median(logs, 0).round(3).tolist(),
                   "rmse": rmse, "nlpd": nlpd, "rhat": d["max_rhat"],
                   "ess": d["min_ess_bulk"]}  # fmt: skip
            rows.append(row)
            print(f"{case} seed {seed} {how:<6}: sampling {seconds:7.2f} s "
                  f"({d['samples_per_chain']} draws/chain, R-hat {d['max_rhat']:.3f}, "
                  f"ESS {d['min_ess_bulk']:.0f}); median "
                  f"log l, log s2 {row['median_log_draws']}; RMSE {rmse:.4f}, NLPD {nlpd:.4f}",
                  flush=True)  # fmt: skip
        best = chosen["all"][0]
        for how in ("subset", "laplace"):
            pick = chosen[how][0]
            full = evaluate("qb-mgp", chosen["all"][1], u, z, cand[[pick, best]]).numpy()
            relative = full[0] / full[1]  # the full posterior's exact scores of the two choices
            print(f"{case} seed {seed} {how}: same next point as all: {pick == best}; the full "
                  f"posterior's score of its choice {relative:.3f} of its best",
                  flush=True)  # fmt: skip
    return rows
