"""A stored model's Sobol indices: the
first-order and total index of each input, per output, with a credible interval over the
posterior's draws (the ``acquisition_samples`` that predictions use), by
:mod:`worker.vocabulary.sobol` (numpy; the SDK's Metamodel can call the same with its arrays).

``method="closed-form"`` (the default) integrates each draw's GP mean exactly: the
squared-exponential kernel makes it a sum of products of Gaussians in each input, and the
indices are the same in the GP's standardized units as in the output's (an affine map); for an
output modeled on the log scale they are those of the mean of ``log y`` (the scale it is
modeled on, and its ``variance`` in ``log y``'s units squared), not of ``exp`` of it.
``method="monte-carlo"`` estimates them from ``(d + 2) samples`` evaluations of each draw's
mean (Saltelli/Jansen): the one to use where the closed form does not hold, i.e. a function of
the mean that is not affine (an output modelled on the log scale and reported by ``exp``) or
another kernel; here it checks the closed form on the same mean.
"""

from __future__ import annotations

import numpy as np
import torch
from scipy import special

from fbgp_al.worker.acquisition import draw_groups
from fbgp_al.worker.answers import _context, output_model
from fbgp_al.worker.fidelity import answers as fidelity_answers
from fbgp_al.worker.gp import distinct, factorize
from fbgp_al.worker.vocabulary import sobol
from fbgp_al.worker.vocabulary.defaults import output_labels, output_names, output_spec


def draw_weights(
    u: torch.Tensor,
    z: torch.Tensor,
    lengthscale: torch.Tensor,
    noise: torch.Tensor,
    label_noise=None,
) -> np.ndarray:
    """``alpha = (K + diag(label_noise) + s2 I)^-1 z`` of each draw (``B x n``): its mean is
    ``k(x, X) alpha``, as :class:`worker.gp.Conditioned` predicts it. Each distinct draw is
    factored once (a Laplace mixture's repeat), in groups whose factors fit ``FIT_ELEMENTS``
    (at 2,000 labels, 150 draws at once would hold 4.8 GB)."""
    repeated = distinct(lengthscale, noise)
    if repeated is not None:
        return draw_weights(u, z, repeated[0], repeated[1], label_noise)[repeated[2].numpy()]
    parts = []
    for g in draw_groups(len(noise), len(z)):
        factor = factorize(u, lengthscale[g], noise[g], label_noise)
        rhs = z.expand(len(noise[g]), -1)[..., None]
        parts.append(torch.cholesky_solve(rhs, factor.chol)[..., 0])
    return torch.cat(parts).numpy()


def sensitivity(
    spec: dict,
    model: dict,
    labels: list[dict],
    *,
    method: str = "closed-form",
    level: float = 0.95,
    draws: int | None = None,
    samples: int = 8192,
    seed: int = 0,
) -> dict:
    """The indices of a single-output campaign's model over its draws:
    :func:`worker.vocabulary.sobol.summarize`'s answer (``inputs``, ``first`` and ``total``, each
    ``{"mean", "low", "high"}``, ``variance`` of the mean in the output's units, ``draws``,
    ``level``, ``method``). ``draws``: that many of the draws, evenly spread (the cost is
    linear in them); ``samples`` and ``seed``: the Monte Carlo's."""
    if method not in sobol.METHODS:
        raise ValueError(f"method {method!r} is not one of {sobol.METHODS}")
    space, scale_y, u, z, post, noise = _context(spec, model, labels)
    lengthscale, s2 = post.lengthscale, post.noise
    if draws is not None and draws < len(s2):
        keep = np.unique(np.linspace(0, len(s2) - 1, max(1, draws)).round().astype(int))
        lengthscale, s2 = lengthscale[keep], s2[keep]
    alpha = draw_weights(u, z, lengthscale, s2, noise)
    u_np, ls = u.numpy(), lengthscale.numpy()
    if method == "closed-form":
        per_draw = sobol.closed_form(space, u_np, alpha, ls, erf=special.erf)
    else:
        mean = sobol.gp_mean(space, u_np, alpha, ls)
        per_draw = sobol.monte_carlo(space, mean, samples=samples, seed=seed)
    return sobol.summarize(per_draw, space, level, method, y_std=scale_y.std)


def sensitivity_outputs(spec: dict, model: dict, labels: list[dict], **options) -> dict:
    """:func:`sensitivity` for each output of a multi-output campaign (each on its own draws):
    ``{"outputs": {name: ...}}``; a single-output campaign's answer as it is."""
    if "fidelity" in model:  # the top level's
        return fidelity_answers.sensitivity(spec, model, labels, **options)
    names = output_names(spec)
    if names is None:
        return sensitivity(spec, model, labels, **options)
    seen = labels[: model["n_labeled"]]
    return {
        "outputs": {
            name: sensitivity(
                output_spec(spec, k),
                output_model(model, name),
                output_labels(seen, name),
                **options,
            )
            for k, name in enumerate(names)
        }
    }
