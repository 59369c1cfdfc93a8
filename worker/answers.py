"""What a stored model answers (``/predict``, ``/acquisition`` and ``/evaluate`` of the OpenAPI
document), as pure functions of the campaign's spec, its model body and its labels: the
posterior-mode GP's and the mixture's predictions, acquisition values, and the paper's test
metrics. An output modeled on the log scale (its model's ``transform`` has ``y_transform``
``log``) answers in its own units by :mod:`worker.vocabulary.lognormal`.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from fbgp_al.worker.acquisition import DrawGPs, qb_mgp
from fbgp_al.worker.acquisition import evaluate as acquisition_values
from fbgp_al.worker.feasibility.campaign import of_model
from fbgp_al.worker.fidelity import answers as fidelity_answers
from fbgp_al.worker.fitting import label_noise
from fbgp_al.worker.gp import LOG_2PI, Conditioned, rbf
from fbgp_al.worker.mcmc import Posterior
from fbgp_al.worker.potential import PRIOR_VARIANCE
from fbgp_al.worker.transforms import OutputStandardization, as_tensor
from fbgp_al.worker.vocabulary import lognormal
from fbgp_al.worker.vocabulary.defaults import (
    output_labels,
    output_names,
    output_spec,
    output_weights,
)
from fbgp_al.worker.vocabulary.space import Space


def _context(spec: dict, model: dict, labels: list[dict]):
    """The campaign's input space, the model's output transform, the labels it saw in its units
    (and their known noise variances, or None), and its thinned draws."""
    seen = labels[: model["n_labeled"]]
    x = [label["x"] for label in seen]
    y = np.array([label["y"] for label in seen], dtype=float)
    box = Space.of(spec["inputs"])
    scale_y = OutputStandardization.of(model["transform"])
    post = Posterior.from_dict(model, draws="acquisition_samples")
    noise = label_noise(spec, seen, scale_y)
    return box, scale_y, as_tensor(box.to_gp(x)), scale_y.to_z(y), post, noise


def predict(spec: dict, model: dict, labels: list[dict], x: list) -> dict:
    """Mode GP's mean and variance of y, and the mixture's, in original units; the mixture's
    chunk by chunk of ``x`` (see :class:`~worker.acquisition.DrawGPs`), so that memory stays
    bounded whatever the number of points. With known noise, a variance is latent + the nugget
    ``s2`` (a new point's own noise is not known). A log output: :func:`predict_log`. A
    multi-fidelity model: :func:`worker.fidelity.answers.predict`."""
    if "fidelity" in model:
        return fidelity_answers.predict(spec, model, labels, x)
    box, scale_y, u, z, post, noise = _context(spec, model, labels)
    cand = as_tensor(box.to_gp(x))
    mode = post.mode()
    mean, var = Conditioned.fit(u, z, mode.lengthscale, mode.noise, noise).predict(cand)
    if scale_y.log:
        draws = DrawGPs(u, z, post.lengthscale, post.noise, noise).chunks(cand)
        return with_p_success(model, cand.numpy(), predict_log(scale_y, mean, var, draws))
    means, variances = [], []
    for m_mean, m_var in DrawGPs(u, z, post.lengthscale, post.noise, noise).chunks(cand):
        means.append(m_mean.mean(0))
        variances.append(qb_mgp(m_mean, m_var))  # QB-MGP's score is the mixture's variance
    mixture_mean = torch.cat(means) if means else torch.empty(0, dtype=u.dtype)
    mixture_var = torch.cat(variances) if variances else torch.empty(0, dtype=u.dtype)
    return with_p_success(
        model,
        cand.numpy(),
        {
            "mean": scale_y.mean_from_z(mean[0]).tolist(),
            "variance": scale_y.variance_from_z(var[0]).tolist(),
            "mixture_mean": scale_y.mean_from_z(mixture_mean).tolist(),
            "mixture_variance": scale_y.variance_from_z(mixture_var).tolist(),
        },
    )


def predict_log(scale_y: OutputStandardization, mean, var, draws) -> dict:
    """A log output's predictions in its units (:func:`worker.vocabulary.lognormal.predictions`)
    from the mode GP's ``mean`` and ``var`` of standardized ``log y`` (``1 x m``) and the draws'
    (``(B x c, B x c)`` chunks of the points)."""
    answer = lognormal.predictions(
        scale_y.mean,
        scale_y.std,
        mean[0].numpy(),
        var[0].numpy(),
        ((m.numpy(), v.numpy()) for m, v in draws),
    )
    return {key: values.tolist() for key, values in answer.items()}


def with_p_success(model: dict, u: np.ndarray, answer: dict) -> dict:
    """``answer`` with ``p_success`` at ``u`` (the GP's features) when ``model`` holds a
    failure model (:mod:`worker.feasibility.campaign`); as it is otherwise."""
    failure = of_model(model)
    if failure is not None:
        answer["p_success"] = failure.p_success(u).tolist()
    return answer


def acquisition(spec: dict, model: dict, labels: list[dict], x: list, name: str) -> dict:
    if "fidelity" in model:
        return fidelity_answers.acquisition(spec, model, labels, x, name)
    box, _, u, z, post, noise = _context(spec, model, labels)
    values = acquisition_values(
        name, post, u, z, as_tensor(box.to_gp(x)), seed=model["version"], label_noise=noise
    )
    return {"values": values.tolist(), "acquisition": name}


def metrics(
    spec: dict, model: dict, labels: list[dict], x: list, y: list, noise: list | None = None
) -> dict:
    """The paper's metrics on a test set (``/evaluate``): joint NLML of the mode GP per point and
    the mixture's mean NLPD (standardized units), RMSE of the mode GP's mean (original units).
    The joint NLML factors the ``m x m`` predictive covariance (the service caps ``m``); the
    mixture's NLPD runs chunk by chunk. ``noise``: the test points' known noise variances
    (original units), added to their predictive variances (latent + ``s2``).

    ``nlml_y`` and ``nlpd_mixture_y`` are the same densities of ``y`` itself (the output's
    units): each point's density of ``z`` times the Jacobian ``|dz/dy|``, ``1 / y_std``, and
    for a log output ``1 / (y_std y)`` (the lognormal's); so they compare models whatever their
    transform. A log output's ``rmse`` is of the mode GP's lognormal mean of ``y``. A
    multi-fidelity model's are of its top level (:func:`worker.fidelity.answers.metrics`)."""
    if "fidelity" in model:
        return fidelity_answers.metrics(spec, model, labels, x, y)
    box, scale_y, u, z, post, known = _context(spec, model, labels)
    cand = as_tensor(box.to_gp(x))
    z_test = scale_y.to_z(y)
    test_noise = (
        scale_y.variance_to_z(noise, y)
        if noise is not None
        else torch.zeros(len(z_test), dtype=z_test.dtype)
    )
    mode = post.mode()
    mean, cov = _joint_predictive(u, z, mode.lengthscale, mode.noise, cand, known, test_noise)
    point_mean = scale_y.mean_from_z(mean)
    if scale_y.log:  # the lognormal's mean of y (latent + s2, as /predict's)
        s2 = (cov.diagonal() - test_noise).numpy() * scale_y.std**2
        point_mean = as_tensor(lognormal.moments(point_mean.numpy(), s2)[0])
    residual = z_test - mean
    # the paper's code's NLML: the same covariance with the noise added once more
    twice = cov.clone()
    twice.diagonal().add_(mode.noise[0])
    nlml_paper = (
        _gaussian_nll(twice, residual)
        - _paper_log_prior(
            mode, model.get("input_scale"), model.get("diagnostics", {}).get("noise_floor", 0.0)
        )
    ) / len(z_test)
    del twice
    nlml = _gaussian_nll(cov, residual) / len(z_test)
    rmse = float(torch.sqrt(((point_mean - as_tensor(y)) ** 2).mean()))
    nlpd, start = [], 0
    for m_mean, m_var in DrawGPs(u, z, post.lengthscale, post.noise, known).chunks(cand):
        zc = z_test[start : start + m_mean.shape[1]]
        m_var = m_var + test_noise[start : start + m_mean.shape[1]]
        start += m_mean.shape[1]
        log_density = -0.5 * ((zc - m_mean) ** 2 / m_var + torch.log(2 * math.pi * m_var))
        nlpd.append(-(torch.logsumexp(log_density, 0) - math.log(len(m_mean))))
    nlpd_mixture = float(torch.cat(nlpd).mean())
    jacobian = math.log(scale_y.std) + (float(scale_y.modeled(y).mean()) if scale_y.log else 0.0)
    return {
        "nlml": nlml,
        "rmse": rmse,
        "nlpd_mixture": nlpd_mixture,
        "nlml_paper": nlml_paper,
        "nlml_y": nlml + jacobian,
        "nlpd_mixture_y": nlpd_mixture + jacobian,
        "n": len(z_test),
    }


def _paper_log_prior(mode: Posterior, input_scale, noise_floor: float = 0.0) -> float:
    """The mode's log prior as the paper's code adds it to its test NLML (``utils/gp_utils.py``:
    gpytorch 1.5.1's ``ExactMarginalLogLikelihood`` on the mode GP's predictive distribution of
    y, which holds the likelihood already, so the noise counts twice): the LogNormal(0,
    sqrt(3)) densities at its lengthscales as the priors state them (divided by
    ``input_scale``, see :func:`worker.fitting.input_scale_prior`) and at its noise variance above
    the model's ``noise_floor`` (the paper's code, too, adds Pyro's jitter of 1e-6 to the noise
    its prior is stated for)."""
    lengthscale = mode.lengthscale[0].numpy()
    if input_scale is not None:
        lengthscale = lengthscale / np.asarray(input_scale, dtype=np.float64)
    log_raw = np.log(np.concatenate([lengthscale, [float(mode.noise[0]) - noise_floor]]))
    return float(
        np.sum(
            -log_raw
            - 0.5 * math.log(2 * math.pi * PRIOR_VARIANCE)
            - log_raw**2 / (2 * PRIOR_VARIANCE)
        )
    )


# jitter added to the predictive covariance's diagonal, in turn, if rounding made it indefinite
JITTERS = (0.0, 1e-10, 1e-8, 1e-6, 1e-4)


def _joint_predictive(
    u, z, lengthscale, noise, candidates, label_noise=None, test_noise=None
) -> tuple[torch.Tensor, torch.Tensor]:
    """The predictive mean of y (``m``) of one GP at ``candidates`` and its covariance
    (``m x m``, one buffer). ``label_noise``: the labels' known noise variances; ``test_noise``:
    the candidates' (``m``), on the diagonal."""
    gp = Conditioned.fit(u, z, lengthscale, noise, label_noise)
    k_star = rbf(u, candidates, lengthscale)[0]  # n x m
    mean = gp.alpha[0] @ k_star
    v = gp.chol_inv[0] @ k_star
    cov = rbf(candidates, candidates, lengthscale)[0]
    cov.addmm_(v.T, v, alpha=-1.0)
    cov.diagonal().add_(noise[0])
    if test_noise is not None:
        cov.diagonal().add_(test_noise)
    return mean, cov


def _gaussian_nll(cov: torch.Tensor, residual: torch.Tensor) -> float:
    """``-log N(residual; 0, cov)``, with growing jitter on ``cov``'s diagonal (in place) when
    rounding made it indefinite."""
    diagonal, added = cov.diagonal(), 0.0
    for jitter in JITTERS:
        diagonal.add_(jitter - added)
        added = jitter
        chol, info = torch.linalg.cholesky_ex(cov)
        if info == 0:
            white = torch.linalg.solve_triangular(chol, residual[:, None], upper=False)[:, 0]
            log_det = 2 * chol.diagonal().log().sum()
            return float(0.5 * (white.square().sum() + log_det + len(residual) * LOG_2PI))
    raise ValueError("the predictive covariance of the test set is not positive definite")


# -- several outputs ---------------------------------------------------------------------------
def output_model(model: dict, name: str) -> dict:
    """Output ``name`` of a multi-output model body as the model body of its single-output
    campaign (its draws, mode, diagnostics, with the inputs' transform and its own ``y_mean``
    and ``y_std``)."""
    own = model["outputs"][name]
    body = {
        **own,
        "version": model["version"],
        "n_labeled": model["n_labeled"],
        "transform": {**model["transform"], **own["transform"]},
    }
    for key in ("features", "input_scale"):
        if key in model:
            body[key] = model[key]
    return body


def _outputs(spec: dict, model: dict, labels: list[dict]):
    """Each output's ``(name, weight, single-output spec, single-output model, labels)``."""
    names, weights = output_names(spec), output_weights(spec)
    return [
        (
            name,
            weights[k],
            output_spec(spec, k),
            output_model(model, name),
            output_labels(labels[: model["n_labeled"]], name),
        )
        for k, name in enumerate(names)
    ]


def predict_outputs(spec: dict, model: dict, labels: list[dict], x: list) -> dict:
    """:func:`predict` for each output of a multi-output campaign: ``{outputs: {name: ...}}``,
    and ``p_success`` beside them when the model has a failure model."""
    parts = _outputs(spec, model, labels)
    answer = {
        "outputs": {name: predict(single, body, seen, x) for name, _, single, body, seen in parts}
    }
    return with_p_success(model, Space.of(spec["inputs"]).to_gp(x), answer)


def acquisition_outputs(spec: dict, model: dict, labels: list[dict], x: list, name: str) -> dict:
    """A multi-output campaign's acquisition: the combined ``values`` (``sum_k w_k score_k``,
    each output's score in its standardized units; ``random``: output 0's alone), and each
    output's scores under ``outputs``."""
    values, each = None, {}
    for k, (out, weight, single, body, seen) in enumerate(_outputs(spec, model, labels)):
        box, _, u, z, post, noise = _context(single, body, seen)
        scores = acquisition_values(
            name, post, u, z, as_tensor(box.to_gp(x)), seed=model["version"] + k, label_noise=noise
        )
        each[out] = scores.tolist()
        if name == "random":
            return {"values": each[out], "acquisition": name}
        values = weight * scores if values is None else values + weight * scores
    return {"values": values.tolist(), "acquisition": name, "outputs": each}


def metrics_outputs(
    spec: dict, model: dict, labels: list[dict], x: list, y: dict, noise: dict | None = None
) -> dict:
    """:func:`metrics` for each output: ``y`` (and ``noise``) ``{name: [...]}``."""
    return {
        "outputs": {
            name: metrics(single, body, seen, x, y[name], None if noise is None else noise[name])
            for name, _, single, body, seen in _outputs(spec, model, labels)
        },
        "n": len(x),
    }
