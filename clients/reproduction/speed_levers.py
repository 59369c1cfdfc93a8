"""``fbgp-al bench-core --cases stop|subset|proposals|search``: issue 40's levers measured side
by side, each against what it would replace: when sampling stops (R-hat waited for or reported),
and large n (the hyperparameters from all labels, a subset of them, or the large campaigns'
Laplace mixture, its proposals and its cold search). See
:mod:`clients.reproduction.core_benchmark`; what scoring costs, in full or screened, is
:mod:`clients.reproduction.screen_levers`.
"""

from __future__ import annotations

import time

import numpy as np
import torch

from fbgp_al.clients.reproduction.core_data import campaign_data, data, fit
from fbgp_al.clients.reproduction.screen_levers import ranking_against
from fbgp_al.clients.simulators import get_simulator
from fbgp_al.worker.acquisition import DrawGPs, evaluate
from fbgp_al.worker.cold_start import local_minima
from fbgp_al.worker.fitting import ranking
from fbgp_al.worker.laplace import laplace_posterior
from fbgp_al.worker.mcmc import sample_posterior
from fbgp_al.worker.potential import GPPotential
from fbgp_al.worker.scoring import Output, Scoring
from fbgp_al.worker.transforms import OutputStandardization
from fbgp_al.worker.vocabulary.defaults import MCMC_DEFAULTS
from fbgp_al.worker.vocabulary.sampler import sampler_line

# the stop rules of --cases stop: R-hat waited for (1.01), R-hat reported only, and that with a
# shorter step-size warm-up of a warm start
STOP_RULES = {
    "rhat": {**MCMC_DEFAULTS, "target_rhat": 1.01},
    "ess": {**MCMC_DEFAULTS, "target_rhat": None},
    "ess-w20": {**MCMC_DEFAULTS, "target_rhat": None, "warm_warmup": 20},
}
# --cases subset: how the hyperparameters are drawn (see compare_subset)
LARGE_N_ARMS = ("all", "subset", "laplace", "laplace-warm", "laplace-search")


def compare_stop_rules(
    simulator: str,
    n: int,
    source: str,
    seeds=(0, 1, 2),
    candidates: int = 10_000,
    acquisition: str = "qb-mgp",
    reference_draws: int = 600,
) -> list[dict]:
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
    ref = sample_posterior(
        u, z, chains=5, warmup=300, samples=reference_draws, seed=99, init="grid", start_metric=True
    )
    reference = evaluate(acquisition, ref.spread(600), u, z, cand).numpy()
    print(
        f"{case}: reference 5 x {reference_draws} draws (R-hat "
        f"{ref.diagnostics['max_rhat']:.3f}, ESS {ref.diagnostics['min_ess_bulk']:.0f}) "
        f"and its scores in {time.perf_counter() - t:.1f} s",
        flush=True,
    )
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
            row = {
                "case": case,
                "rule": rule,
                "seed": seed,
                "refit_s": refit_s,
                "scoring_s": scoring_s,
                "gradient_evaluations": d["gradient_evaluations"],
                "draws_per_chain": d["samples_per_chain"],
                "rhat": d["max_rhat"],
                "ess": d["min_ess_bulk"],
                "start": d["warm_start"],
                **ranking_against(scores, reference),
            }
            chosen.setdefault(rule, []).append(scores)
            rows.append(row)
            print(
                f"  {rule:<7} seed {seed}: refit {refit_s:6.2f} s ({row['gradient_evaluations']}"
                f" grad evals, {row['draws_per_chain']} draws/chain, R-hat {row['rhat']:.3f}, "
                f"ESS {row['ess']:.0f}, {row['start']}), scoring {scoring_s:.2f} s; next point:"
                f" reference rank {row['rank']}, top-10 overlap {row['overlap']:.1f}, "
                f"reference score {row['relative']:.3f} of its best",
                flush=True,
            )
    for rule, runs in chosen.items():  # the noise of the draws: seed against seed, one rule
        pairs = [ranking_against(a, b) for i, a in enumerate(runs) for b in runs[i + 1 :]]
        print(
            f"  {rule:<7} seed against seed: ranks {[p['rank'] for p in pairs]}, top-10 "
            f"overlap {[p['overlap'] for p in pairs]}",
            flush=True,
        )
    for rule in STOP_RULES:
        mine = [r for r in rows if r["rule"] == rule]
        print(
            f"  {rule:<4} median refit {np.median([r['refit_s'] for r in mine]):.2f} s, "
            f"median reference rank {np.median([r['rank'] for r in mine]):.0f}, "
            f"median overlap {np.median([r['overlap'] for r in mine]):.2f}",
            flush=True,
        )
    return rows


class _ValuesByCall:
    """A potential whose values alone come from its gradient call (the cold search before it
    ranked its starts by :meth:`worker.potential.GPPotential.values`)."""

    def __init__(self, potential: GPPotential):
        self.potential = potential

    def values(self, theta):
        return self.potential(theta)[0]

    def __getattr__(self, name):
        return getattr(self.potential, name)

    def __call__(self, theta):
        return self.potential(theta)


def time_cold_search(simulator: str, sizes, seed: int = 0) -> list[dict]:
    """The cold search for the posterior's modes (:func:`worker.cold_start.local_minima`, the
    start of a first refit and of the Laplace mixture's search once the labels have doubled)
    on ``n`` uniform random labels, its ~450 candidates ranked by their values alone (one
    Cholesky each) and by the gradient call, side by side: seconds, the ratio, and whether
    the minima found are the same."""
    rows = []
    for n in sizes:
        u, z = data(simulator, n, seed)
        potential = GPPotential(u.numpy(), z.numpy(), noise_floor=MCMC_DEFAULTS["noise_floor"])
        potential(np.zeros((1, u.shape[1] + 1)))  # its buffers, before either is timed
        seconds, found = {}, {}
        for how, p in (("values", potential), ("call", _ValuesByCall(potential))):
            t = time.perf_counter()
            found[how] = local_minima(p, seed)
            seconds[how] = time.perf_counter() - t
        same = all(
            np.array_equal(a[1], b[1]) for a, b in zip(found["values"], found["call"], strict=True)
        )
        rows.append({"case": f"{simulator} n={n}", **seconds, "same": same})
        print(
            f"{simulator} n={n}: cold search {seconds['values']:.2f} s ranking by values alone"
            f", {seconds['call']:.2f} s by the gradient call "
            f"({seconds['call'] / seconds['values']:.2f}x); the same minima: {same}",
            flush=True,
        )
    return rows


def _laplace(u, z, seed: int, warm: bool, search: bool = False):
    """The large campaigns' posterior (:func:`worker.laplace.laplace_posterior`) on all labels:
    cold, or warm from its own posterior on all but the last label (not timed), with the cold
    search that a doubling of the labels brings beside the warm starts if ``search``."""
    previous = laplace_posterior(u[:-1], z[:-1], seed=seed + 1).adaptation if warm else None
    if previous is not None:
        previous["searched_at"] = len(u) // 2 if search else len(u) - 1
    t = time.perf_counter()
    post = laplace_posterior(u, z, seed=seed, previous=previous)
    return post, time.perf_counter() - t


def compare_subset(
    simulator: str,
    n: int,
    subset: int = 200,
    seeds=(0, 1),
    candidates: int = 10_000,
    test_points: int = 2_000,
    arms=LARGE_N_ARMS,
) -> list[dict]:
    """Large n (issue 40's fourth lever): the hyperparameters sampled by the defaults' NUTS on
    all ``n`` labels (``all``), on a seeded ``subset`` of them (``subset``), and drawn from the
    large campaigns' Laplace mixture (:mod:`worker.laplace`: importance-resampled, its Pareto
    ``k`` checked), cold (``laplace``) or warm from its posterior on ``n - 1`` labels
    (``laplace-warm``, as a campaign's next refit; ``laplace-search``: with the cold search
    beside the warm starts that a doubling of the labels brings), each posterior's 150 draws
    then conditioned on all ``n`` labels (those of ``arms``; ``all`` always). Side by side: the
    sampling's seconds, the draws' medians of the log lengthscales and log noise, the mixture's RMSE
    against the noise-free function and NLPD of noisy labels at ``test_points`` uniform points
    (original units), and the next point (QB-MGP, screened, over ``candidates``): whether each
    arm chooses the same as ``all``, and ``all``'s score of its choice relative to its best."""
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
        for how in ("all", *(a for a in arms if a != "all")):
            keep = (
                np.sort(np.random.default_rng([seed, 5]).choice(n, subset, replace=False))
                if how == "subset"
                else np.arange(n)
            )
            t = time.perf_counter()
            if how.startswith("laplace"):
                post, seconds = _laplace(u, z, seed, how != "laplace", how == "laplace-search")
            else:
                post = fit(u[keep], z[keep], MCMC_DEFAULTS, seed=40 + seed)
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
            scores = ranking.here(ranking.scored("qb-mgp", fn, cand)).numpy()
            chosen[how] = (int(np.argmax(scores)), thin)
            logs = post.log_draws().numpy()
            d = post.diagnostics
            row = {
                "case": case,
                "seed": seed,
                "how": how,
                "seconds": seconds,
                "median_log_draws": np.median(logs, 0).round(3).tolist(),
                "rmse": rmse,
                "nlpd": nlpd,
                "rhat": d["max_rhat"],
                "ess": d["min_ess_bulk"],
                "khat": d.get("khat"),
                "start": d["warm_start"],
            }
            rows.append(row)
            print(
                f"{case} seed {seed} {how:<6}: sampling {seconds:7.2f} s "
                f"({d['gradient_evaluations']} gradients, {d['samples_per_chain']} "
                f"draws/chain; {sampler_line(d)}, {d['warm_start']}); median "
                f"log l, log s2 {row['median_log_draws']}; RMSE {rmse:.4f}, NLPD {nlpd:.4f}",
                flush=True,
            )
        best = chosen["all"][0]
        for how in (a for a in arms if a != "all"):
            pick = chosen[how][0]
            full = evaluate("qb-mgp", chosen["all"][1], u, z, cand[[pick, best]]).numpy()
            relative = full[0] / full[1]  # the full posterior's exact scores of the two choices
            print(
                f"{case} seed {seed} {how}: same next point as all: {pick == best}; the full "
                f"posterior's score of its choice {relative:.3f} of its best",
                flush=True,
            )
    return rows


# --cases proposals: the Laplace mixture's proposal, (degrees of freedom or None, draws weighed
# or None for worker.laplace.proposal_count's)
PROPOSALS = ((None, 150), (None, 300), (5.0, 150), (5.0, 300), (5.0, None))


def compare_proposals(simulator: str, n: int, seeds=tuple(range(8))) -> list[dict]:
    """The large campaigns' proposal (:mod:`worker.laplace`): on ``n`` uniform random labels,
    the mixture's draws re-weighed from the modes of a cold search, once per seed, for each of
    :data:`PROPOSALS` (Gaussian or Student-t components; 150 or 300 draws weighed): the Pareto
    ``k`` of each, how many are within the limit, and the seconds per refit."""
    sim = get_simulator(simulator)
    rng = np.random.default_rng(0)
    unit = rng.random((n, sim.dim))
    y = sim.sample(sim.lower + unit * (sim.upper - sim.lower), rng)
    z = OutputStandardization.from_labels(y).to_z(y).numpy()
    modes = laplace_posterior(unit, z, seed=1).adaptation
    rows = []
    for df, count in PROPOSALS:
        t, ks = time.perf_counter(), []
        for seed in seeds:
            d = laplace_posterior(
                unit, z, seed=100 + seed, previous=modes, df=df, proposals=count
            ).diagnostics
            ks.append(d["khat"])
        seconds = (time.perf_counter() - t) / len(seeds)
        passed = sum(k <= d["khat_limit"] for k in ks)
        rows.append(
            {
                "case": f"{simulator} n={n}",
                "df": df,
                "proposals": count,
                "khat": ks,
                "passed": passed,
                "seconds": seconds,
            }
        )
        print(
            f"{simulator} n={n} {'t' + str(int(df)) if df else 'gaussian':<8} "
            f"{count or 'default'} draws weighed: k {[round(k, 2) for k in ks]}, within "
            f"{d['khat_limit']:.2f}: {passed} of {len(ks)}; {seconds:.2f} s a refit",
            flush=True,
        )
    return rows
