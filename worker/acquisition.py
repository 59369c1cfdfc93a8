"""The acquisitions a campaign may name (``acquisition``), maximized over candidates.

With ``M`` posterior draws of the hyperparameters, each GP ``m`` predicts ``y`` at a candidate with
mean ``mu_m`` and variance ``s2_m`` (noise included):

- ``alm``: ``s2`` of the single GP at the posterior mode;
- ``b-alm``: ``mean_m s2_m``;
- ``b-qbc``: ``var_m mu_m`` (population variance, ``1/M``);
- ``qb-mgp``: ``b-alm + b-qbc``, the variance of the mixture ``(1/M) sum_m N(mu_m, s2_m)``;
- ``bald``: ``H[mixture] - mean_m H[N(mu_m, s2_m)]``, the mixture's entropy by quadrature;
- ``random``: uniform random scores (seeded);
- ``bald-std``: ``log(mean_m sf_m) - mean_m log sf_m`` with ``sf_m`` the latent (noise-free)
  standard deviations: BALD as the paper's public code computes it, the mixture's entropy by a
  log-of-mean-std shortcut that ignores the means. For comparisons with the paper only: it is
  blind to the draws' disagreement about the mean.

Candidates are scored in chunks, predictions and scores together, and the draws' GPs are fitted in
groups when they would not fit one buffer (``FIT_ELEMENTS``), so memory stays bounded whatever
the number of candidates, draws, labels and points pending. Each acquisition computes only what
it reads: ``b-qbc`` the means, without the variances (``MEANS_ONLY``).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch

from fbgp_al.worker.fantasies import CONDITIONED_FROM, Fantasized, greedy_picks
from fbgp_al.worker.gp import Conditioned, aligned
from fbgp_al.worker.mcmc import Posterior
from fbgp_al.worker.transforms import DTYPE, as_tensor
from fbgp_al.worker.vocabulary.defaults import ACQUISITIONS

# BALD's quadrature: each candidate integrates over [min(mu - 8 s), max(mu + 8 s)] with a spacing
# of at most the smallest component sd (the trapezoid rule converges geometrically on
# this smooth integrand: against scipy's adaptive quadrature the error is ~2e-7, and 1e-13 with
# half that spacing, at twice the cost),
# with a power-of-two number of nodes between these bounds, so a candidate's value does not depend
# on which others it is scored with.
QUADRATURE_HALF_WIDTH = 8.0
QUADRATURE_MIN_NODES = 32
QUADRATURE_NODES_PER_SD = 1
QUADRATURE_MAX_NODES = 16384
# The component densities of a chunk of candidates (draws x candidates x nodes) are evaluated in a
# buffer of at most this many float64 elements (1 MB, small enough to stay in cache), or of one
# candidate's where that is more.
QUADRATURE_ELEMENTS = 1 << 17

# The draws' GPs are fitted together while their factors (draws x n x n) hold at most this many
# float64 elements (128 MB); beyond, in groups of draws, each fitted again for every block of
# candidates. A block's predictions (draws x candidates, means and variances) hold at most
# ``BLOCK_ELEMENTS`` each (16 MB).
FIT_ELEMENTS = 1 << 24
BLOCK_ELEMENTS = 1 << 21
# In groups, the predictions of whole blocks (draws x candidates) held at once, at most this many
# elements each (64 MB): each group of draws is fitted once for them all, not once per block.
SPAN_ELEMENTS = 1 << 23
# A greedy batch's picks after the first are made among this many best candidates of its first
# scoring (fantasies only lower scores): the candidates a screened scoring scores exactly too
# (worker.fitting.ranking.SCREEN_KEEP)
SHORTLIST = 1000


def b_alm(mean: torch.Tensor, var: torch.Tensor) -> torch.Tensor:
    """``M x c`` predictive means and variances -> ``c``."""
    return var.mean(0)


def b_qbc(mean: torch.Tensor, var: torch.Tensor | None) -> torch.Tensor:
    return mean.var(0, correction=0)


def qb_mgp(mean: torch.Tensor, var: torch.Tensor) -> torch.Tensor:
    return b_alm(mean, var) + b_qbc(mean, var)


def gaussian_entropy(var: torch.Tensor) -> torch.Tensor:
    return 0.5 * torch.log(2 * math.pi * math.e * var)


def mixture_entropy(mean: torch.Tensor, var: torch.Tensor) -> torch.Tensor:
    """Entropy of the equal-weight mixture of ``N(mean_m, var_m)`` (``M x c`` each) -> ``c``, by
    the trapezoid rule on a grid per candidate (see ``QUADRATURE_*``)."""
    sd = var.sqrt()
    lo = (mean - QUADRATURE_HALF_WIDTH * sd).min(0).values
    hi = (mean + QUADRATURE_HALF_WIDTH * sd).max(0).values
    needed = ((hi - lo) * QUADRATURE_NODES_PER_SD / sd.min(0).values).ceil() + 1
    nodes = torch.exp2(torch.log2(needed.clamp(QUADRATURE_MIN_NODES, QUADRATURE_MAX_NODES)).ceil())
    # standardized distance of a candidate's nodes from each component: start + stride * t
    start = ((lo - mean) / sd).T.contiguous()  # c x M
    stride = ((hi - lo) / sd).T.contiguous()
    weight = (1.0 / (sd * (len(mean) * math.sqrt(2 * math.pi)))).T.contiguous()
    out = torch.empty(mean.shape[1], dtype=DTYPE)
    for count in nodes.unique().tolist():
        idx = (nodes == count).nonzero().squeeze(-1)
        step = max(1, QUADRATURE_ELEMENTS // (mean.shape[0] * int(count)))
        grid = torch.linspace(0.0, 1.0, int(count), dtype=DTYPE)
        work = torch.empty(min(step, len(idx)), mean.shape[0], int(count), dtype=DTYPE)
        for i in range(0, len(idx), step):
            j = idx[i : i + step]
            density = _mixture_density(start[j], stride[j], weight[j], grid, work[: len(j)])
            integrand = torch.where(density > 0, -density * density.log(), 0.0)  # c x G
            # trapezoid: the end nodes lie 8 sd out, where the integrand is ~1e-14 of its peak
            h = (hi[j] - lo[j]) / (int(count) - 1)
            out[j] = h * (integrand.sum(-1) - 0.5 * (integrand[:, 0] + integrand[:, -1]))
    return out


def _mixture_density(start, stride, weight, grid, work) -> torch.Tensor:
    """The mixture's density at each candidate's nodes (``c x G``): ``start``, ``stride``,
    ``weight`` (``c x M``) place and weigh the components, ``grid`` (``G``) the nodes in
    ``[0, 1]``; ``work``: a ``c x M x G`` buffer, overwritten."""
    torch.mul(stride[:, :, None], grid, out=work).add_(start[:, :, None])
    work.square_().mul_(-0.5).exp_()
    return torch.bmm(weight[:, None, :], work)[:, 0, :]


def bald(mean: torch.Tensor, var: torch.Tensor) -> torch.Tensor:
    return mixture_entropy(mean, var) - gaussian_entropy(var).mean(0)


def bald_std(latent_var: torch.Tensor) -> torch.Tensor:
    """``M x c`` latent variances -> ``c``: the log-of-mean-std shortcut (``bald-std``)."""
    log_sd = 0.5 * latent_var.clamp_min(1e-300).log()
    return torch.logsumexp(log_sd, 0) - math.log(len(log_sd)) - log_sd.mean(0)


SCORES: dict[str, Callable[[torch.Tensor, torch.Tensor | None], torch.Tensor]] = {
    "alm": b_alm,  # on the single mode GP, B-ALM is its variance
    "b-alm": b_alm,
    "b-qbc": b_qbc,
    "qb-mgp": qb_mgp,
    "bald": bald,
}

# Acquisitions that read only the draws' predictive means (their scorers get ``var=None``).
MEANS_ONLY = frozenset({"b-qbc"})


def scorer(
    name: str, noise: torch.Tensor
) -> Callable[[torch.Tensor, torch.Tensor | None], torch.Tensor]:
    """Acquisition ``name`` as a function of the draws' predictive means and variances of y
    (``M x c`` each; the variances ``None`` for ``MEANS_ONLY``); ``noise``: the draws' noise
    variances (``M``)."""
    if name in ("bald-code", "bald-std"):
        return lambda mean, var: bald_std(var - noise[:, None])
    return SCORES[name]


def draw_groups(n_draws: int, n: int) -> list[slice]:
    """The draws in groups whose factors (``group x n x n``) hold at most ``FIT_ELEMENTS``
    float64 elements, one draw a group at least: the one grouping that every pass factoring
    the draws one group at a time uses (scoring, accuracy, sensitivity, a polish)."""
    per = max(1, FIT_ELEMENTS // max(1, n * n))
    return [slice(i, i + per) for i in range(0, n_draws, per)]


class DrawGPs:
    """The GPs of a posterior's draws, fitted to ``(u, z)`` (and the labels' known noise
    variances ``label_noise``, ``n``, when they have some): all at once when their factors fit
    ``FIT_ELEMENTS``, else in groups of draws, each fitted once for a span of blocks of
    candidates (:meth:`chunks`; :meth:`predict` fits each group once for its candidates)."""

    def __init__(self, u, z, lengthscale, noise, label_noise=None):
        self.u, self.z, self.lengthscale, self.noise = u, z, lengthscale, noise
        self.label_noise = label_noise
        self.groups = draw_groups(len(noise), len(u))
        self.whole = (
            Conditioned.fit(u, z, lengthscale, noise, label_noise)
            if len(self.groups) == 1
            else None
        )

    def fits(self):
        """Each group of draws (a slice of them) with its GPs fitted: all the draws at once
        where their factors fit ``FIT_ELEMENTS`` (fitted when made), else group by group."""
        if self.whole is not None:
            yield slice(0, len(self.noise)), self.whole
            return
        for g in self.groups:
            yield (
                g,
                Conditioned.fit(
                    self.u, self.z, self.lengthscale[g], self.noise[g], self.label_noise
                ),
            )

    @property
    def block(self) -> int:
        """Candidates per block: ``draws x block`` elements at most ``BLOCK_ELEMENTS``, a power
        of two (:func:`worker.gp.aligned`)."""
        return aligned(BLOCK_ELEMENTS // max(1, len(self.noise)))

    @property
    def span(self) -> int:
        """Candidates whose predictions (``draws x span``) are held at once in groups: whole
        blocks, ``SPAN_ELEMENTS`` at most (one block at least)."""
        per_block = len(self.noise) * self.block
        return self.block * max(1, SPAN_ELEMENTS // max(1, per_block))

    def chunks(self, candidates: torch.Tensor, variance: bool = True):
        """``(mean, var)`` of y (``draws x c`` each) for consecutive chunks of ``candidates``;
        ``var`` is ``None`` unless ``variance``. In groups, the chunks are the blocks
        (:attr:`block`), and each group of draws is fitted once per :attr:`span` of them."""
        if self.whole is not None:
            yield from self.whole.chunks(candidates, variance)
            return
        for start in range(0, len(candidates), self.span):
            mean, var = self.blockwise(candidates[start : start + self.span], variance)
            for i in range(0, mean.shape[1], self.block):
                part = slice(i, i + self.block)
                yield mean[:, part].contiguous(), (var[:, part].contiguous() if variance else None)

    def blockwise(
        self, candidates: torch.Tensor, variance: bool = True, out: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """:meth:`predict` of each block of ``candidates`` in turn, each group of draws fitted
        once for all of them: the numbers of a :meth:`predict` per block (a group's fit and
        its predictions of a block are the same), with a factorization per group instead of
        one per group and block."""
        shape = (len(self.noise), len(candidates))
        mean = torch.empty(shape, dtype=DTYPE)
        var = torch.empty(shape, dtype=DTYPE) if variance else None
        for g, fitted in self.fits():
            runs = None if out is None else fitted.out(out)
            for i in range(0, len(candidates), self.block):
                part = slice(i, i + self.block)
                mean[g, part], v = fitted.predict(candidates[part], variance, runs)
                if variance:
                    var[g, part] = v
        return mean, var

    def predict(
        self, candidates: torch.Tensor, variance: bool = True
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """``(mean, var)`` of y at ``candidates``, ``draws x m`` each, all of them at once;
        ``var`` is ``None`` unless ``variance``."""
        shape = (len(self.noise), len(candidates))
        mean = torch.empty(shape, dtype=DTYPE)
        var = torch.empty(shape, dtype=DTYPE) if variance else None
        if self.whole is not None:
            start = 0
            for m, v in self.whole.chunks(candidates, variance):
                mean[:, start : start + m.shape[1]] = m
                if variance:
                    var[:, start : start + m.shape[1]] = v
                start += m.shape[1]
            return mean, var
        for g, fitted in self.fits():
            mean[g], v = fitted.predict(candidates, variance)
            if variance:
                var[g] = v
        return mean, var


def _blocks(total: int, size: int):
    return (slice(i, i + size) for i in range(0, total, size))


def evaluate(
    name: str, posterior: Posterior, u, z, candidates, *, seed: int = 0, label_noise=None
) -> torch.Tensor:
    """Acquisition ``name`` at ``candidates`` (``m x d``, unit cube) from the GPs of
    ``posterior``'s draws (all of them: thin first with :meth:`Posterior.thinned`), fitted to
    ``u`` (``n x d``) and ``z`` (``n``), with the labels' known noise variances ``label_noise``
    (``n``) if any. Returns ``m`` values, larger is better."""
    candidates = as_tensor(candidates)
    if name not in ACQUISITIONS:
        raise ValueError(f"unknown acquisition {name!r}; known: {', '.join(ACQUISITIONS)}")
    if name == "random":
        generator = torch.Generator().manual_seed(seed)
        return torch.rand(len(candidates), generator=generator, dtype=DTYPE)
    if name == "alm":
        posterior = posterior.mode()
    gps = DrawGPs(
        as_tensor(u),
        as_tensor(z),
        posterior.lengthscale,
        posterior.noise,
        None if label_noise is None else as_tensor(label_noise),
    )
    score = scorer(name, posterior.noise)
    parts = [score(mean, var) for mean, var in gps.chunks(candidates, name not in MEANS_ONLY)]
    return torch.cat(parts) if parts else torch.empty(0, dtype=DTYPE)


def greedy_batch(
    name: str,
    posterior: Posterior,
    u,
    z,
    candidates,
    size: int,
    pending=None,
    *,
    shortlist: int = SHORTLIST,
    seed: int = 0,
    label_noise=None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """A batch of ``size`` candidates chosen one after another (``candidates``: ``m x d``).

    After each pick, every posterior-draw GP is conditioned on the picked input with its own
    predicted mean as the label (a fantasy): its mean stays as it was everywhere, its variance
    drops near the pick, and the acquisition is scored again. Inputs still out for labeling
    (``pending``, ``k x d``) are fantasies from the start. Picks after the first are made among
    the ``shortlist`` best candidates of the first scoring (fantasies only lower scores).
    The first scoring runs block by block (``BLOCK_ELEMENTS``): only the scores are kept.

    ``label_noise``: the labels' known noise variances (``n``) if any; a fantasy's noise is not
    known, so it has the nugget ``s2`` alone.

    Returns the picked rows of ``candidates`` in order and their scores when picked.
    """
    return greedy_batch_outputs(
        name,
        [(1.0, posterior, u, z, label_noise)],
        candidates,
        size,
        pending,
        shortlist=shortlist,
        seed=seed,
    )


def _output_gps(name: str, parts: list[tuple]) -> list[tuple]:
    """Each output's ``(weight, posterior, u, z, label_noise, its draws' GPs, scorer)``."""
    outputs = []
    for weight, posterior, u, z, noise in parts:
        posterior = posterior.mode() if name == "alm" else posterior
        u, z = as_tensor(u), as_tensor(z)
        noise = None if noise is None else as_tensor(noise)
        base = DrawGPs(u, z, posterior.lengthscale, posterior.noise, noise)
        outputs.append((weight, posterior, u, z, noise, base, scorer(name, posterior.noise)))
    return outputs


def _gps_with(output, inputs) -> DrawGPs:
    """An output's draws' GPs with ``inputs`` added as fantasies: the variance of y does not
    depend on the labels, so the fantasies' labels are placeholders."""
    _, posterior, u, z, noise, _, _ = output
    zs = torch.cat([z, torch.zeros(len(inputs), dtype=DTYPE)])
    known = None if noise is None else torch.cat([noise, torch.zeros(len(inputs), dtype=DTYPE)])
    return DrawGPs(torch.cat([u, inputs]), zs, posterior.lengthscale, posterior.noise, known)


def _fantasies(outputs: list[tuple], pending) -> torch.Tensor:
    dim = outputs[0][2].shape[1]
    return as_tensor(pending).reshape(-1, dim) if pending is not None else outputs[0][2][:0]


def batch_scores(name: str, parts: list[tuple], candidates, pending=None) -> torch.Tensor:
    """The first scoring of a greedy batch (:func:`greedy_batch_outputs`, not ``random``):
    ``sum_k weight_k * score_k`` at every candidate, with the ``pending`` inputs as fantasies,
    block by block. Each candidate's score depends on it alone, so the candidates may be
    scored in parts (on other workers) and put together."""
    outputs = _output_gps(name, parts)
    return _scored(outputs, as_tensor(candidates), _fantasies(outputs, pending), name)


def _scored(outputs: list[tuple], candidates, fantasies, name: str) -> torch.Tensor:
    variance = name not in MEANS_ONLY
    scores = torch.zeros(len(candidates), dtype=DTYPE)
    for output in outputs:
        weight, base, score = output[0], output[5], output[6]
        # from CONDITIONED_FROM labels the points out are conditioned on, not refitted with
        out = len(fantasies) > 0 and variance and len(output[2]) >= CONDITIONED_FROM
        refit = len(fantasies) and variance and not out
        with_pending = _gps_with(output, fantasies) if refit else base
        # in groups, a span of blocks per fit of each group; all draws at once, a block a time
        step = base.block if base.whole is not None else base.span
        for span in _blocks(len(candidates), step):
            means, variances = base.blockwise(
                candidates[span], variance, fantasies if out else None
            )
            if with_pending is not base:
                variances = with_pending.blockwise(candidates[span])[1]
            for i in range(0, means.shape[1], base.block):
                block = slice(i, i + base.block)
                at = slice(span.start + i, span.start + i + base.block)
                v = None if variances is None else variances[:, block].contiguous()
                scores[at] += weight * score(means[:, block].contiguous(), v)
    return scores


def greedy_batch_outputs(
    name: str,
    parts: list[tuple],
    candidates,
    size: int,
    pending=None,
    *,
    shortlist: int = SHORTLIST,
    seed: int = 0,
    scores: torch.Tensor | None = None,
    weights: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`greedy_batch` for several outputs: ``parts`` holds each output's ``(weight,
    posterior, u, z, label_noise)``, and a candidate's score is ``sum_k weight_k * score_k``
    (each output's in its standardized units). Each pick is a fantasy for every output's GPs;
    ``random``: output 0's random scores (``seed``). :func:`greedy_batch` is its one output
    of weight 1. ``scores``: the first scoring (:func:`batch_scores`) if done already.
    ``weights``: each candidate's probability of success (the failure model), which multiplies
    its score at every pick (None: none, and the batch is the acquisition's, bit for bit)."""
    candidates = as_tensor(candidates)
    if name == "random" or len(candidates) == 0:
        scores = torch.zeros(len(candidates), dtype=DTYPE)
        for weight, posterior, u, z, noise in parts[:1] if name == "random" else parts:
            scores += (1.0 if name == "random" else weight) * evaluate(
                name, posterior, u, z, candidates, seed=seed, label_noise=noise
            )
        if weights is not None:
            scores = scores * weights
        order = torch.argsort(scores, descending=True, stable=True)[:size]
        return order, scores[order]
    variance = name not in MEANS_ONLY
    outputs = _output_gps(name, parts)
    fantasies = _fantasies(outputs, pending)
    if scores is None:
        scores = _scored(outputs, candidates, fantasies, name)
    if weights is not None:
        scores = scores * weights
    short = torch.argsort(scores, descending=True, stable=True)[:shortlist]
    short = short[scores[short] > -torch.inf]  # a screen's left-out candidates stay out
    states = [None] * len(outputs)  # from CONDITIONED_FROM labels: the picks as conditioning
    if variance and len(outputs[0][2]) >= CONDITIONED_FROM and size > 1:
        at = candidates[short]
        states = [Fantasized.of(o[5], at, fantasies if len(fantasies) else None) for o in outputs]
        means = [state.mean for state in states]
    else:
        means = [output[5].predict(candidates[short], False)[0] for output in outputs]

    def rescored(best: int) -> torch.Tensor:
        nonlocal fantasies
        fantasies = torch.cat([fantasies, candidates[short[best]][None]])
        current = torch.zeros(len(short), dtype=DTYPE)
        for output, mean, state in zip(outputs, means, states, strict=True):
            if state is not None:
                state.add(best)
                variances = state.variances()
            else:
                variances = _gps_with(output, fantasies).predict(candidates[short])[1]
            current += output[0] * output[6](mean, variances)
        return current if weights is None else current * weights[short]

    picked, picked_scores = greedy_picks(scores[short], size, rescored if variance else None)
    return short[picked], picked_scores
