"""``fbgp-al bench-core --cases stop|screen|repro-screen|subset|proposals|search``: issue 40's
levers measured side by side, each against what it would replace: when sampling stops (R-hat waited
for or reported), what scoring costs (in full or screened, also on the reproduction's own
campaigns), and large n (the hyperparameters from all labels, a subset
of them, or the large campaigns' Laplace mixture). See :mod:`clients.reproduction.core_benchmark`.
"""

from __future__ import annotations

import time

import numpy as np
import torch

from fbgp_al.clients.reproduction.core_data import RESULTS, campaign_data, data, fit
from fbgp_al.clients.reproduction.protocol import grid_pool
from fbgp_al.clients.simulators import get_simulator
from fbgp_al.worker.acquisition import DrawGPs, evaluate
from fbgp_al.worker.cold_start import local_minima
from fbgp_al.worker.fitting import ranking
from fbgp_al.worker.laplace import laplace_posterior
from fbgp_al.worker.mcmc import sample_posterior
from fbgp_al.worker.potential import GPPotential
from fbgp_al.worker.scoring import Output, Scoring
from fbgp_al.worker.spec.defaults import MCMC_DEFAULTS, MCMC_PRESETS, POOL_SUBSAMPLE, RANKING_SIZE
from fbgp_al.worker.spec.sampler import sampler_line
from fbgp_al.worker.transforms import OutputStandardization

# the stop rules of --cases stop: R-hat waited for (1.01), R-hat reported only, and that with a
# shorter step-size warm-up of a warm start
STOP_RULES = {"rhat": {**MCMC_DEFAULTS, "target_rhat": 1.01},
              "ess": {**MCMC_DEFAULTS, "target_rhat": None},
              "ess-w20": {**MCMC_DEFAULTS, "target_rhat": None, "warm_warmup": 20}}  # fmt: skip
# --cases subset: how the hyperparameters are drawn (see compare_subset)
LARGE_N_ARMS = ("all", "subset", "laplace", "laplace-warm", "laplace-search")


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


def _above(rough: np.ndarray, best: int) -> int:
    """How many candidates the screen's rough scores rank above candidate ``best`` (ties in
    candidate order, as the screen's stable sort breaks them)."""
    return int(np.sum(rough > rough[best]) + np.sum(rough[:best] == rough[best]))


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
    u, z = campaign_data(simulator, n) if source == "campaign" else data(simulator, n)
    case = f"{simulator} n={n} {source}"
    rows = []
    for seed in seeds:
        post = (laplace_posterior(u, z, seed=30 + seed) if n >= MCMC_DEFAULTS["laplace_from"]
                else fit(u, z, MCMC_DEFAULTS, seed=30 + seed))  # fmt: skip
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
            rough = ranking.here(fn.with_draws(ranking.SCREEN_DRAWS), cand).numpy()
            needed = _above(rough, int(best_full[0]))  # the least the screen must keep, less 1
            row = {"case": case, "seed": seed, "acquisition": name, "full_s": full_s,
                   "screened_s": screened_s, "same_point": bool(best_full[0] == best_screened[0]),
                   "overlap": len(set(best_full) & set(best_screened)) / RANKING_SIZE,
                   "best_in_screen": needed,
                   "exact_where_kept": bool(np.allclose(full[np.isfinite(screened)],
                                                        screened[np.isfinite(screened)],
                                                        rtol=1e-9, atol=0))}  # fmt: skip
            rows.append(row)
            print(f"{case} seed {seed} {name:<6}: full {full_s:5.2f} s, screened "
                  f"{screened_s:5.2f} s ({full_s / screened_s:.1f}x); same point: "
                  f"{row['same_point']}, top-{RANKING_SIZE} overlap {row['overlap']:.2f}, "
                  f"{needed} candidates above the exact best in the screen's order, "
                  f"exact where kept: {row['exact_where_kept']}", flush=True)  # fmt: skip
    return rows


def compare_reproduction_screening(simulator: str, sizes, runs=(0, 1, 2),
                                   acquisitions=("qb-mgp", "b-alm", "bald"), preset="paper",
                                   results=RESULTS) -> list[dict]:  # fmt: skip
    """Whether the screen changes the reproduction's campaigns: at each of ``sizes`` labels of
    each stored campaign of ``simulator`` (``docs/reproduction/results.jsonl``: its labels in
    the order it chose them), the ``preset`` refit on those labels, and the acquisition's
    scores of a seeded 10,000-point subsample of the pool less the labeled points, in full
    and as a campaign scores them (:func:`worker.fitting.ranking.scores_of`, screened where
    the work calls for it): the same next point or not, where the exact best stands in the
    screen's order, and the top-10 overlap. A campaign whose every choice is the same follows
    the same path, and so scores the same RD-AUC."""
    from fbgp_al.clients.reproduction.results import labeled_points, read_results

    sim = get_simulator(simulator)
    pool = grid_pool(sim)
    records = [r for r in read_results(results) if r["simulator"] == simulator]
    mcmc = MCMC_PRESETS[preset]
    rows = []
    for run in runs:
        for name in acquisitions:
            x, y = labeled_points(records, simulator, name, run)
            for n in sizes:
                if y is None or len(y) < n:
                    print(f"{simulator} run {run} {name}: {0 if y is None else len(y)} labels "
                          f"stored, not {n}", flush=True)  # fmt: skip
                    continue
                unit = sim.to_unit(x[:n])
                u = torch.from_numpy(unit)
                z = OutputStandardization.from_labels(y[:n]).to_z(y[:n])
                rng = np.random.default_rng([run, n])
                index = pool.subsample(POOL_SUBSAMPLE, rng, exclude=pool.index_of(unit))
                cand = torch.from_numpy(pool.points(index))
                t = time.perf_counter()
                post = fit(u, z, mcmc, seed=1000 * run + n)
                refit_s = time.perf_counter() - t
                fn = Scoring(name, (Output(1.0, post.for_scoring(mcmc), u, z, None, run),))
                t = time.perf_counter()
                full = ranking.here(fn, cand).numpy()
                full_s = time.perf_counter() - t
                t = time.perf_counter()
                served = ranking.scores_of(name, fn, cand, ranking.here).numpy()
                served_s = time.perf_counter() - t
                rough = ranking.here(fn.with_draws(ranking.SCREEN_DRAWS), cand).numpy()
                best = int(np.argmax(full))
                row = {"simulator": simulator, "run": run, "acquisition": name, "n": n,
                       "screened": ranking.screens(name, fn, cand),
                       "same_point": best == int(np.argmax(served)),
                       "best_in_screen": _above(rough, best),
                       "overlap": _ranking_against(served, full)["overlap"],
                       "refit_s": refit_s, "full_s": full_s, "served_s": served_s}  # fmt: skip
                rows.append(row)
                print(f"{simulator} run {run} {name:<6} n={n}: screened {row['screened']}, "
                      f"same point {row['same_point']}, {row['best_in_screen']} candidates "
                      f"above the exact best in the screen's order, top-10 overlap "
                      f"{row['overlap']:.1f}; refit {refit_s:.1f} s, scoring {full_s:.1f} s "
                      f"in full, {served_s:.1f} s as served", flush=True)  # fmt: skip
    same = sum(r["same_point"] for r in rows if r["screened"])
    screened = sum(r["screened"] for r in rows)
    print(f"{simulator}: the same next point in {same} of {screened} screened states "
          f"(at most {max((r['best_in_screen'] for r in rows), default=0)} candidates above "
          f"the exact best in the screen's order, kept: "
          f"{ranking.SCREEN_KEEP})", flush=True)  # fmt: skip
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
        same = all(np.array_equal(a[1], b[1])
                   for a, b in zip(found["values"], found["call"], strict=True))  # fmt: skip
        rows.append({"case": f"{simulator} n={n}", **seconds, "same": same})
        print(f"{simulator} n={n}: cold search {seconds['values']:.2f} s ranking by values alone"
              f", {seconds['call']:.2f} s by the gradient call "
              f"({seconds['call'] / seconds['values']:.2f}x); the same minima: {same}",
              flush=True)  # fmt: skip
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


def compare_subset(simulator: str, n: int, subset: int = 200, seeds=(0, 1),
                   candidates: int = 10_000, test_points: int = 2_000,
                   arms=LARGE_N_ARMS) -> list[dict]:  # fmt: skip
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
            keep = (np.sort(np.random.default_rng([seed, 5]).choice(n, subset, replace=False))
                    if how == "subset" else np.arange(n))  # fmt: skip
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
            scores = ranking.scored("qb-mgp", fn, cand, ranking.here).numpy()
            chosen[how] = (int(np.argmax(scores)), thin)
            logs = post.log_draws().numpy()
            d = post.diagnostics
            row = {"case": case, "seed": seed, "how": how, "seconds": seconds,
                   "median_log_draws": np.median(logs, 0).round(3).tolist(),
                   "rmse": rmse, "nlpd": nlpd, "rhat": d["max_rhat"],
                   "ess": d["min_ess_bulk"], "khat": d.get("khat"),
                   "start": d["warm_start"]}  # fmt: skip
            rows.append(row)
            print(f"{case} seed {seed} {how:<6}: sampling {seconds:7.2f} s "
                  f"({d['gradient_evaluations']} gradients, {d['samples_per_chain']} "
                  f"draws/chain; {sampler_line(d)}, {d['warm_start']}); median "
                  f"log l, log s2 {row['median_log_draws']}; RMSE {rmse:.4f}, NLPD {nlpd:.4f}",
                  flush=True)  # fmt: skip
        best = chosen["all"][0]
        for how in (a for a in arms if a != "all"):
            pick = chosen[how][0]
            full = evaluate("qb-mgp", chosen["all"][1], u, z, cand[[pick, best]]).numpy()
            relative = full[0] / full[1]  # the full posterior's exact scores of the two choices
            print(f"{case} seed {seed} {how}: same next point as all: {pick == best}; the full "
                  f"posterior's score of its choice {relative:.3f} of its best",
                  flush=True)  # fmt: skip
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
            d = laplace_posterior(unit, z, seed=100 + seed, previous=modes, df=df,
                                  proposals=count).diagnostics  # fmt: skip
            ks.append(d["khat"])
        seconds = (time.perf_counter() - t) / len(seeds)
        passed = sum(k <= d["khat_limit"] for k in ks)
        rows.append({"case": f"{simulator} n={n}", "df": df, "proposals": count, "khat": ks,
                     "passed": passed, "seconds": seconds})  # fmt: skip
        print(f"{simulator} n={n} {'t' + str(int(df)) if df else 'gaussian':<8} "
              f"{count or 'default'} draws weighed: k {[round(k, 2) for k in ks]}, within "
              f"{d['khat_limit']:.2f}: {passed} of {len(ks)}; {seconds:.2f} s a refit",
              flush=True)  # fmt: skip
    return rows
