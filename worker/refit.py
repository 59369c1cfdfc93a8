"""One refit of a campaign as pure math: NUTS on all labels, thinning, the mode, scoring of a
fresh pool subsample, ranking; and the model-based answers (predict, acquisition, evaluate).

Inputs and outputs are plain lists and dicts (JSON-able); the store and the queue stay in
:mod:`worker.jobs`. Campaign specs are the dicts of CONTRACT.md's campaign body.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np
import torch

from worker.acquisition import evaluate as acquisition_values
from worker.acquisition import greedy_batch
from worker.design import GridPool, PointPool
from worker.gp import Conditioned, predictive_covariance
from worker.mcmc import Posterior, run_chains, sample_posterior
from worker.transforms import InputScaling, OutputStandardization, as_tensor

RANKING_SIZE = 64  # ranked points kept with a model, best first
MAX_BATCH = 32  # the longest greedy batch of a parallel-mode campaign


def scaling(spec: dict) -> InputScaling:
    return InputScaling(
        lower=tuple(float(i["lower"]) for i in spec["inputs"]),
        upper=tuple(float(i["upper"]) for i in spec["inputs"]),
    )


@dataclass(frozen=True)
class Data:
    """A campaign's labels in the GP's units, and the seed of the refit on them."""

    u: torch.Tensor
    z: torch.Tensor
    scale_x: InputScaling
    scale_y: OutputStandardization
    seed: int

    @property
    def n(self) -> int:
        return len(self.z)


def prepare(spec: dict, labels: list[dict]) -> Data:
    x = np.array([label["x"] for label in labels], dtype=float)
    y = np.array([label["y"] for label in labels], dtype=float)
    scale_x, scale_y = scaling(spec), OutputStandardization.from_labels(y)
    seed = (int(spec["seed"]) * 1_000_003 + len(labels)) % 2**32
    return Data(scale_x.to_unit(x), scale_y.to_z(y), scale_x, scale_y, seed)


def warm_start_of(spec: dict, previous: dict | None) -> dict | None:
    """The previous model's adaptation, when the campaign's ``mcmc`` asks for warm starts."""
    if previous and spec["mcmc"].get("warm_start", False):
        return previous.get("adaptation")
    return None


def fit(
    spec: dict, pool: GridPool | PointPool, labels: list[dict], exclude: set[int],
    pending: list[int] = (), previous: dict | None = None,
) -> tuple[dict, list]:  # fmt: skip
    """Refit on ``labels`` (``[{x, y, ...}]``), all chains in this process, and rank (see
    :func:`finish`). ``previous``: the campaign's last model, to warm-start from when its
    ``mcmc`` asks so."""
    started = time.perf_counter()
    data = prepare(spec, labels)
    post = posterior(spec, data, warm_start_of(spec, previous))
    return finish(spec, pool, data, post, exclude, pending, started)


def _sampler_options(spec: dict) -> dict:
    """The campaign's MCMC options as keywords of :mod:`worker.mcmc` (specs made before an
    option existed get the behavior they were made with)."""
    mcmc = spec["mcmc"]
    return {"warm_warmup": mcmc.get("warm_warmup", 50), "init": mcmc.get("init", "uniform")}


def posterior(spec: dict, data: Data, warm: dict | None) -> Posterior:
    """All chains of the campaign's posterior, in this process."""
    mcmc = spec["mcmc"]
    return sample_posterior(data.u, data.z, mcmc["chains"], mcmc["warmup"], mcmc["samples"],
                            seed=data.seed, warm_start=warm, **_sampler_options(spec))  # fmt: skip


def chains(spec: dict, data: Data, chain_ids: list[int] | None = None, warm: dict | None = None):
    """Some (default: all) of the posterior's chains: ``(Draws, "warm" | "cold")``."""
    mcmc = spec["mcmc"]
    ids = list(range(mcmc["chains"])) if chain_ids is None else chain_ids
    return run_chains(data.u, data.z, ids, mcmc["warmup"], mcmc["samples"], data.seed,
                      warm_start=warm, **_sampler_options(spec))  # fmt: skip


def finish(
    spec: dict, pool: GridPool | PointPool, data: Data, post: Posterior, exclude: set[int],
    pending: list[int], started: float,
) -> tuple[dict, list]:  # fmt: skip
    """Thin, then rank pool points not in ``exclude``: the ``RANKING_SIZE`` best, or in parallel
    mode a greedy batch of ``max_pending`` chosen with the ``pending`` pool points (out for
    labeling) as fantasies. Returns the model (CONTRACT.md's ``/model`` body) and the ranking
    (``[{index, x, score}]``, in the order to hand out)."""
    u, z, seed, n = data.u, data.z, data.seed, data.n
    thin = post.thinned(spec["mcmc"]["thinning"])
    rng = np.random.default_rng([int(spec["seed"]), n])
    candidates = pool.subsample(
        spec["pool_subsample"], rng, exclude=sorted(set(exclude) | set(pending))
    )
    ranking = []
    if len(candidates):
        cand_u = torch.from_numpy(pool.points(candidates))
        if spec.get("mode") == "parallel":
            size = min(int(spec["max_pending"]), MAX_BATCH)
            pending_u = torch.from_numpy(pool.points(list(pending))) if len(pending) else None
            order, scores = greedy_batch(spec["acquisition"], thin, u, z, cand_u, size, pending_u,
                                         seed=seed)  # fmt: skip
            best, best_scores = order.numpy(), scores.numpy()
        else:
            scores = acquisition_values(spec["acquisition"], thin, u, z, cand_u, seed=seed).numpy()
            best = np.argsort(-scores, kind="stable")[:RANKING_SIZE]
            best_scores = scores[best]
        points = data.scale_x.from_unit(pool.points(candidates[best])).tolist()
        ranking = [
            {"index": int(candidates[b]), "x": p, "score": float(v)}
            for b, p, v in zip(best, points, best_scores, strict=True)
        ]
    diagnostics = dict(post.diagnostics, refit_seconds=time.perf_counter() - started, seed=seed)
    model = {
        "version": n,
        "n_labeled": n,
        "samples": {"lengthscale": post.lengthscale.tolist(), "noise": post.noise.tolist()},
        "acquisition_samples": {
            "lengthscale": thin.lengthscale.tolist(),
            "noise": thin.noise.tolist(),
        },
        "mode": {"lengthscale": post.mode_lengthscale.tolist(), "noise": post.mode_noise},
        "transform": {
            "lower": list(data.scale_x.lower),
            "upper": list(data.scale_x.upper),
            "y_mean": data.scale_y.mean,
            "y_std": data.scale_y.std,
        },  # fmt: skip
        "chains": post.chains,
        "diagnostics": diagnostics,
        "adaptation": post.adaptation,
    }
    return model, ranking


def _context(spec: dict, model: dict, labels: list[dict]):
    x = np.array([label["x"] for label in labels[: model["n_labeled"]]], dtype=float)
    y = np.array([label["y"] for label in labels[: model["n_labeled"]]], dtype=float)
    t = model["transform"]
    scale_x = InputScaling(lower=tuple(t["lower"]), upper=tuple(t["upper"]))
    scale_y = OutputStandardization(mean=t["y_mean"], std=t["y_std"])
    samples = model["acquisition_samples"]
    post = Posterior(
        lengthscale=as_tensor(samples["lengthscale"]),
        noise=as_tensor(samples["noise"]),
        chains=1,
        mode_lengthscale=as_tensor(model["mode"]["lengthscale"]),
        mode_noise=float(model["mode"]["noise"]),
    )
    return scale_x, scale_y, scale_x.to_unit(x), scale_y.to_z(y), post


def predict(spec: dict, model: dict, labels: list[dict], x: list) -> dict:
    """Mode GP's mean and variance of y, and the mixture's, in original units."""
    scale_x, scale_y, u, z, post = _context(spec, model, labels)
    cand = scale_x.to_unit(x)
    mode = post.mode()
    mean, var = Conditioned.fit(u, z, mode.lengthscale, mode.noise).predict(cand)
    m_mean, m_var = Conditioned.fit(u, z, post.lengthscale, post.noise).predict(cand)
    mixture_mean = m_mean.mean(0)
    mixture_var = m_var.mean(0) + m_mean.var(0, correction=0)
    return {
        "mean": scale_y.mean_from_z(mean[0]).tolist(),
        "variance": scale_y.variance_from_z(var[0]).tolist(),
        "mixture_mean": scale_y.mean_from_z(mixture_mean).tolist(),
        "mixture_variance": scale_y.variance_from_z(mixture_var).tolist(),
    }


def acquisition(spec: dict, model: dict, labels: list[dict], x: list, name: str) -> dict:
    scale_x, _, u, z, post = _context(spec, model, labels)
    values = acquisition_values(name, post, u, z, scale_x.to_unit(x), seed=model["version"])
    return {"values": values.tolist(), "acquisition": name}


def evaluate(spec: dict, model: dict, labels: list[dict], x: list, y: list) -> dict:
    """The paper's metrics on a test set (CONTRACT.md): joint NLML of the mode GP per point and
    the mixture's mean NLPD (standardized units), RMSE of the mode GP's mean (original units)."""
    scale_x, scale_y, u, z, post = _context(spec, model, labels)
    cand = scale_x.to_unit(x)
    z_test = scale_y.to_z(y)
    mode = post.mode()
    mean, cov = predictive_covariance(u, z, mode.lengthscale, mode.noise, cand)
    dist = torch.distributions.MultivariateNormal(mean[0], covariance_matrix=_psd(cov[0]))
    nlml = float(-dist.log_prob(z_test)) / len(z_test)
    rmse = float(torch.sqrt(((scale_y.mean_from_z(mean[0]) - as_tensor(y)) ** 2).mean()))
    m_mean, m_var = Conditioned.fit(u, z, post.lengthscale, post.noise).predict(cand)
    log_density = -0.5 * ((z_test - m_mean) ** 2 / m_var + torch.log(2 * math.pi * m_var))
    nlpd = -(torch.logsumexp(log_density, 0) - math.log(len(m_mean)))
    return {"nlml": nlml, "rmse": rmse, "nlpd_mixture": float(nlpd.mean()), "n": len(z_test)}


def _psd(cov: torch.Tensor) -> torch.Tensor:
    """The covariance, with jitter on its diagonal if rounding made it indefinite."""
    eye = torch.eye(len(cov), dtype=cov.dtype)
    for jitter in (0.0, 1e-10, 1e-8, 1e-6):
        if torch.linalg.cholesky_ex(cov + jitter * eye)[1] == 0:
            return cov + jitter * eye
    return cov + 1e-4 * eye
