"""Sobol indices of a GP's posterior mean, per posterior draw (numpy only: the workers and the
SDK's :class:`~clients.metamodel.Metamodel` share it, so it lives with the input space).

The inputs are independent, each uniform over its values: a float input over its bounds, a log
input on the log scale (both: uniform in the pool coordinate ``v`` in [0, 1]), an int input over
its integers, a choice input over its values (one input, however many one-hot features it
has). For a GP of ``worker/gp.py`` (ARD squared-exponential kernel of unit scale) one draw's
mean is ``m(x) = sum_i alpha_i k(x, X_i)`` with ``alpha = (K + diag(label_noise) + s2 I)^-1 z``,
and ``k(x, X_i) = prod_j k_j(x_j, X_ij)`` factorizes over the inputs (a choice's block of
features is one factor). So, with per input ``j``

    e_j[i]     = E[k_j(x_j, X_ij)]                            (n)
    W_j[i, i'] = E[k_j(x_j, X_ij) k_j(x_j, X_i'j)]            (n x n)
    C_j        = W_j - e_j e_j^T   (the covariance of the features k_j(x_j, X_.j))

and ``E_-j`` / ``W_-j`` the elementwise products of the ``e_k`` / ``W_k`` over ``k != j``:

    mu    = alpha . prod_j e_j
    V     = alpha^T (prod_j W_j) alpha - mu^2          (Var m)
    V_j   = (alpha * E_-j)^T C_j (alpha * E_-j)       (Var E[m | x_j])
    V_Tj  = alpha^T (W_-j * C_j) alpha                (E Var[m | x_-j] = V - Var E[m | x_-j])

``S_j = V_j / V``, ``ST_j = V_Tj / V``. ``V_j`` and ``V_Tj`` are quadratic forms in positive
semidefinite matrices (a Schur product of two is one), so they are not differences of large
numbers however large ``alpha`` is. For a float or log input, with ``c = (a + b) / 2``,

    E[k_j(x, a)]           = l sqrt(pi / 2) [erf((1 - a) / (l sqrt 2)) + erf(a / (l sqrt 2))]
    E[k_j(x, a) k_j(x, b)] = exp(-(a - b)^2 / (4 l^2)) l sqrt(pi) / 2
                             [erf((1 - c) / l) + erf(c / l)]

and for an int or a choice input they are means over its ``L`` values (``K_q``: ``L x n``, the
kernel between the values and the labels: ``e = mean_q K_q``, ``W = K_q^T K_q / L``). An int
input of more than ``MAX_LEVELS`` values is taken as continuous over ``[-h/2, 1 + h/2]`` (``h``
its spacing in ``v``): the midpoint rule's error, ``O(h^2 / l^2)``.

Cost per distinct draw (a Laplace mixture's draws repeat; each distinct one is integrated
once): ``O(m^2)`` erf evaluations per float input (``m``: the labels' distinct values of it,
few on a grid pool) and ``O(L m^2)`` for a discrete one, then ``O(d n^2)`` elementwise
products, in ``(2 d + 4) n^2`` float64s; draws go in chunks of ``CHUNK_ELEMENTS``. What does not
depend on the draw (the labels' distinct values of each input) is computed once. On the 2-core
VM (one thread, loaded), 6 float inputs and 150 draws took 2.8 s at n = 200 (1.5 s with labels
on a 21-level grid) and 24 s at n = 500; see the benchmarks page for n = 2,000.

:func:`monte_carlo` estimates the same indices of any function of the inputs (Saltelli 2010's
first-order and Jansen's total estimator, ``(d + 2) N`` evaluations): for what the closed form
does not cover, e.g. an output modelled on the log scale and reported by ``exp``, or another
kernel.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from fbgp_al.worker.vocabulary.space import Input, Space

# int inputs of more values than this are integrated as continuous ones (see the docstring)
MAX_LEVELS = 1024
# float64 elements of one chunk of draws' work (2 d + 4 arrays of chunk x n x n): 64 MB
CHUNK_ELEMENTS = 1 << 23
# |x| beyond which erf(x) is +-1 in float64
ERF_ONE = 6.0

# Cephes' erf (ndtr.c): erf(x) = x T(x^2) / U(x^2) for |x| < 1, else 1 - erfc(|x|) with
# erfc(x) = exp(-x^2) P(x) / Q(x) for x < 8 (R / S beyond); within 4.5e-16 of math.erf
_T = (
    9.60497373987051638749e0,
    9.00260197203842689217e1,
    2.23200534594684319226e3,
    7.00332514112805075473e3,
    5.55923013010394962768e4,
)
_U = (
    1.0,
    3.35617141647503099647e1,
    5.21357949780152679795e2,
    4.59432382970980127987e3,
    2.26290000613890934246e4,
    4.92673942608635921086e4,
)
_P = (
    2.46196981473530512524e-10,
    5.64189564831068821977e-1,
    7.46321056442269912687e0,
    4.86371970985681366614e1,
    1.96520832956077098242e2,
    5.26445194995477358631e2,
    9.34528527171957607540e2,
    1.02755188689515710272e3,
    5.57535335369399327526e2,
)
_Q = (
    1.0,
    1.32281951154744992508e1,
    8.67072140885989742329e1,
    3.54937778887819891062e2,
    9.75708501743205489753e2,
    1.82390916687909736289e3,
    2.24633760818710981792e3,
    1.65666309194161350182e3,
    5.57535340817727675546e2,
)

# how the indices are computed: each draw's GP mean integrated exactly, or sampled
METHODS = ("closed-form", "monte-carlo")


def _poly(coefficients, x: np.ndarray) -> np.ndarray:
    out = coefficients[0] * x
    out += coefficients[1]
    for c in coefficients[2:]:
        out *= x
        out += c
    return out


def erf(x) -> np.ndarray:
    """The error function, elementwise, in numpy alone (within 4.5e-16 of ``math.erf``)."""
    x = np.asarray(x, dtype=np.float64)
    a = np.abs(x)
    small = a < 1.0
    if small.all():
        z = x * x
        return x * _poly(_T, z) / _poly(_U, z)
    out = np.ones_like(x)
    xs = x[small]
    z = xs * xs
    out[small] = xs * _poly(_T, z) / _poly(_U, z)
    mid = ~small & (a < ERF_ONE)
    am = a[mid]
    tail = _poly(_P, am)
    tail /= _poly(_Q, am)
    tail *= np.exp(-am * am)
    out[mid] = 1.0 - tail
    np.copysign(out, x, out=out, where=~small)
    return out


# -- one input's integrals -----------------------------------------------------------------------
def _interval_moments(a: np.ndarray, ls: np.ndarray, lo: float, hi: float, erf: Callable = erf):
    """``e`` (``B x m``) and ``W`` (``B x m x m``) of a 1-feature input uniform on ``[lo, hi]``:
    ``a`` the labels' distinct values of the feature (``m``), ``ls`` the draws' lengthscales
    (``B``), ``erf`` the error function to use (see :func:`closed_form`). ``W``'s erfs are
    evaluated on its upper triangle only (it is symmetric)."""
    width = hi - lo
    ls = ls[:, None]
    r2 = ls * math.sqrt(2.0)
    e = ls * math.sqrt(math.pi / 2) * (erf((hi - a) / r2) - erf((lo - a) / r2)) / width
    rows, cols = np.triu_indices(len(a))
    c = 0.5 * (a[rows] + a[cols])  # the pairs' midpoints
    diff = a[rows] - a[cols]
    inner = erf((hi - c) / ls) - erf((lo - c) / ls)  # B x pairs
    inner *= np.exp(-(diff * diff) / (4.0 * ls * ls))
    inner *= ls * (math.sqrt(math.pi) / 2) / width
    W = np.empty((len(ls), len(a), len(a)))
    W[:, rows, cols] = inner
    W[:, cols, rows] = inner
    return e, W


def _discrete_moments(levels: np.ndarray, feats: np.ndarray, ls: np.ndarray):
    """``e`` and ``W`` of an input uniform over ``L`` values: ``levels`` their features
    (``L x f``), ``feats`` the labels' (``n x f``), ``ls`` the draws' lengthscales (``B x f``)."""
    a = levels[None] / ls[:, None, :]  # B x L x f
    b = feats[None] / ls[:, None, :]  # B x n x f
    sq = (a * a).sum(-1)[:, :, None] + (b * b).sum(-1)[:, None, :] - 2 * a @ b.transpose(0, 2, 1)
    Kq = np.exp(-0.5 * np.maximum(sq, 0.0))  # B x L x n
    return Kq.mean(1), Kq.transpose(0, 2, 1) @ Kq / len(levels)


def _blocks(space: Space) -> list[tuple[Input, slice]]:
    out, start = [], 0
    for inp in space.inputs:
        out.append((inp, slice(start, start + inp.n_features)))
        start += inp.n_features
    return out


def _levels(inp: Input) -> np.ndarray | None:
    """The pool coordinates of a discrete input's values, or None for a continuous one (a
    float, a log, an int of more than ``MAX_LEVELS`` values)."""
    if inp.type == "choice":
        return np.arange(inp.k) / (inp.k - 1)
    if inp.type == "int" and inp.upper - inp.lower + 1 <= MAX_LEVELS:
        return inp.to_pool(np.arange(int(inp.lower), int(inp.upper) + 1, dtype=np.float64))
    return None


class _Axis:
    """What one input's integrals need of the labels, the same for every draw: the labels'
    distinct values of its features and each label's among them (None: each label's own, in
    order, spread to no copies), its values' features (a discrete input) or its interval (a
    continuous one). A grid pool's labels take a few values per input, so the erfs are few."""

    def __init__(self, inp: Input, cols: slice, u: np.ndarray):
        self.cols = cols
        values = u[:, cols]
        distinct, inverse = np.unique(values, axis=0, return_inverse=True)
        self.values, self.inverse = distinct, inverse.reshape(-1)
        if len(distinct) == len(u):  # no repeats: the labels' own values, in their order
            self.values, self.inverse = values, None
        levels = _levels(inp)
        self.levels = None if levels is None else inp.features(levels)
        self.lo, self.hi = 0.0, 1.0
        if self.levels is None and inp.type == "int":  # many values: continuous over cells
            h = 0.5 / (inp.upper - inp.lower)
            self.lo, self.hi = -h, 1.0 + h

    def moments(self, ls: np.ndarray, erf: Callable):
        """``e_j`` (``B x n``) and ``W_j`` (``B x n x n``) under the draws' lengthscales
        ``ls`` (``B x F``), spread to the labels."""
        if self.levels is not None:
            e, W = _discrete_moments(self.levels, self.values, ls[:, self.cols])
        else:
            a, lo, hi = self.values[:, 0], self.lo, self.hi
            e, W = _interval_moments(a, ls[:, self.cols.start], lo, hi, erf)
        if self.inverse is None:
            return e, W
        inverse = self.inverse
        return e[:, inverse], W[:, inverse[:, None], inverse[None, :]]


# -- the closed form ---------------------------------------------------------------------------
def _quad(alpha: np.ndarray, M: np.ndarray) -> np.ndarray:
    """``alpha_b^T M_b alpha_b`` for each draw ``b``."""
    return np.einsum("bi,bij,bj->b", alpha, M, alpha)


def _chunk(axes: list[_Axis], alpha, ls, erf: Callable = erf):
    d = len(axes)
    moments = [axis.moments(ls, erf) for axis in axes]
    es = [m[0] for m in moments]
    Ws = [m[1] for m in moments]
    # prefix and suffix products (no division: a W's entries may underflow to 0)
    e_pre, e_suf = [np.ones_like(alpha)], [np.ones_like(alpha)]
    for j in range(d):
        e_pre.append(e_pre[-1] * es[j])
        e_suf.append(e_suf[-1] * es[d - 1 - j])
    W_suf = [None] * (d + 1)
    W_suf[d] = np.ones_like(Ws[0])
    for j in range(d - 1, -1, -1):
        W_suf[j] = W_suf[j + 1] * Ws[j]
    mu = (alpha * e_pre[d]).sum(-1)
    variance = _quad(alpha, W_suf[0]) - mu * mu
    first, total = np.empty((len(alpha), d)), np.empty((len(alpha), d))
    W_pre = np.ones_like(Ws[0])
    for j in range(d):
        C = Ws[j] - es[j][:, :, None] * es[j][:, None, :]
        q = alpha * e_pre[j] * e_suf[d - 1 - j]
        first[:, j] = _quad(q, C)
        total[:, j] = _quad(alpha, W_pre * W_suf[j + 1] * C)
        W_pre = W_pre * Ws[j]
    return variance, first, total


def _repeated(ls: np.ndarray, alpha: np.ndarray):
    """The distinct draws among ``(ls, alpha)`` (``B x F``, ``B x n``): their lengthscales and
    weights, and each draw's row among them (``B``); None when no two draws are the same."""
    distinct, index = np.unique(np.c_[ls, alpha], axis=0, return_inverse=True)
    if len(distinct) == len(ls):
        return None
    width = ls.shape[1]
    return distinct[:, :width], distinct[:, width:], index.reshape(-1)


def closed_form(space: Space, u, alpha, lengthscale, erf: Callable = erf) -> dict:
    """Each draw's variance of the mean ``V`` (``B``, in the GP's units) and its first-order
    and total indices (``B x d``, the inputs in ``space``'s order): ``u`` the labels' features
    (``n x F``, :meth:`Space.to_gp`), ``alpha`` (``B x n``), ``lengthscale`` (``B x F``).
    A draw whose mean is constant (``V <= 0``) has indices 0. ``erf``: the error function,
    elementwise (the workers pass ``scipy.special.erf``, the same to 1 ulp and about three
    times as fast as this module's numpy one, which the SDK uses)."""
    u = np.asarray(u, dtype=np.float64).reshape(-1, space.n_features)
    alpha = np.atleast_2d(np.asarray(alpha, dtype=np.float64))
    ls = np.atleast_2d(np.asarray(lengthscale, dtype=np.float64))
    if alpha.shape != (len(ls), len(u)) or ls.shape[1] != space.n_features:
        raise ValueError(
            f"alpha {alpha.shape} and lengthscale {ls.shape} do not fit "
            f"{len(u)} labels of {space.n_features} features"
        )
    repeated = _repeated(ls, alpha)
    if repeated is not None:  # a draw repeated (a Laplace mixture's) is integrated once
        once = closed_form(space, u, repeated[1], repeated[0], erf)
        return {key: values[repeated[2]] for key, values in once.items()}
    n, d = len(u), space.dim
    axes = [_Axis(inp, cols, u) for inp, cols in _blocks(space)]
    step = max(1, CHUNK_ELEMENTS // ((2 * d + 4) * max(1, n * n)))
    parts = [
        _chunk(axes, alpha[b : b + step], ls[b : b + step], erf) for b in range(0, len(ls), step)
    ]
    variance = np.concatenate([p[0] for p in parts])
    first = np.concatenate([p[1] for p in parts])
    total = np.concatenate([p[2] for p in parts])
    return _ratios(variance, first, total)


def _ratios(variance, first, total) -> dict:
    ok = variance > 0
    scale = np.where(ok, 1.0 / np.where(ok, variance, 1.0), 0.0)[:, None]
    return {"variance": np.maximum(variance, 0.0), "first": first * scale, "total": total * scale}


# -- Monte Carlo ---------------------------------------------------------------------------------
def sample_inputs(space: Space, count: int, rng: np.random.Generator) -> np.ndarray:
    """``count`` points in pool coordinates (``count x d``), each input independent and uniform
    over its values."""
    return space.stratify(rng.random((count, space.dim)))


def monte_carlo(
    space: Space,
    f: Callable[[np.ndarray], np.ndarray],
    samples: int = 8192,
    seed: int = 0,
    chunk: int = 4096,
) -> dict:
    """Sobol indices of ``f`` by Monte Carlo: ``f`` maps points in pool coordinates
    (``m x d``) to values (``B x m``: one row per draw, or ``m`` for one function). With
    ``A``, ``B`` two independent samples of ``samples`` points and ``AB_j`` ``A`` with column
    ``j`` from ``B``: ``V_j = mean(f(B) (f(AB_j) - f(A)))`` (Saltelli 2010) and
    ``V_Tj = mean((f(A) - f(AB_j))^2) / 2`` (Jansen 1999), over ``V`` the variance of
    ``f(A), f(B)``; ``(d + 2) samples`` evaluations. Answers as :func:`closed_form`, plus
    ``first_se`` and ``total_se``: the estimators' standard errors (their numerators' sample
    standard deviation over ``sqrt(samples)``, divided by ``V``). ``f``'s values are shifted
    by their first mean, against cancellation where it is far from 0."""
    rng = np.random.default_rng(seed)
    d = space.dim
    sums, shift = None, 0.0
    for start in range(0, samples, chunk):
        m = min(chunk, samples - start)
        A, B = sample_inputs(space, m, rng), sample_inputs(space, m, rng)
        fa, fb = np.atleast_2d(f(A)), np.atleast_2d(f(B))
        if sums is None:
            shift = fa.mean(1, keepdims=True)
            sums = {k: np.zeros((len(fa), d)) for k in ("v1", "v1sq", "vt", "vtsq")}
            sums.update(s=np.zeros(len(fa)), s2=np.zeros(len(fa)))
        fa, fb = fa - shift, fb - shift
        sums["s"] += fa.sum(1) + fb.sum(1)
        sums["s2"] += (fa * fa).sum(1) + (fb * fb).sum(1)
        for j in range(d):
            AB = A.copy()
            AB[:, j] = B[:, j]
            fab = np.atleast_2d(f(AB)) - shift
            one = fb * (fab - fa)
            tot = 0.5 * (fa - fab) ** 2
            sums["v1"][:, j] += one.sum(1)
            sums["v1sq"][:, j] += (one * one).sum(1)
            sums["vt"][:, j] += tot.sum(1)
            sums["vtsq"][:, j] += (tot * tot).sum(1)
    mean = sums["s"] / (2 * samples)
    variance = sums["s2"] / (2 * samples) - mean * mean
    v1, vt = sums["v1"] / samples, sums["vt"] / samples
    out = _ratios(variance, v1, vt)
    scale = np.where(variance > 0, 1.0 / np.maximum(variance, 1e-300), 0.0)[:, None]
    se1 = np.sqrt(np.maximum(sums["v1sq"] / samples - v1 * v1, 0.0) / samples)
    set_ = np.sqrt(np.maximum(sums["vtsq"] / samples - vt * vt, 0.0) / samples)
    return {**out, "first_se": se1 * scale, "total_se": set_ * scale}


def gp_mean(space: Space, u, alpha, lengthscale, chunk: int = 4096) -> Callable:
    """The draws' posterior means as a function of points in pool coordinates (``m x d`` ->
    ``B x m``), for :func:`monte_carlo`: at most ``chunk`` points at a time, fewer where their
    ``B x chunk x n`` distances would pass ``CHUNK_ELEMENTS``; each distinct draw once."""
    u = np.asarray(u, dtype=np.float64)
    alpha = np.atleast_2d(np.asarray(alpha, dtype=np.float64))
    ls = np.atleast_2d(np.asarray(lengthscale, dtype=np.float64))
    repeated = _repeated(ls, alpha)
    if repeated is not None:  # a draw repeated is evaluated once
        once = gp_mean(space, u, repeated[1], repeated[0], chunk)
        return lambda v: once(v)[repeated[2]]
    chunk = max(1, min(chunk, CHUNK_ELEMENTS // max(1, len(ls) * len(u))))

    def mean(v: np.ndarray) -> np.ndarray:
        x = space.features(v)
        out = np.empty((len(ls), len(x)))
        for s in range(0, len(x), chunk):
            a = x[None, s : s + chunk] / ls[:, None, :]
            b = u[None] / ls[:, None, :]
            sq = (
                (a * a).sum(-1)[:, :, None]
                + (b * b).sum(-1)[:, None, :]
                - 2 * a @ b.transpose(0, 2, 1)
            )
            out[:, s : s + chunk] = np.einsum("bmn,bn->bm", np.exp(-0.5 * np.maximum(sq, 0)), alpha)
        return out

    return mean


# -- over the posterior's draws ------------------------------------------------------------------
def summarize(
    per_draw: dict,
    space: Space,
    level: float = 0.95,
    method: str = "closed-form",
    y_std: float = 1.0,
) -> dict:
    """Each index's mean over the draws and its equal-tailed credible interval (``level``):
    ``{"inputs": names, "first": {"mean", "low", "high"}, "total": {...}, "variance": {...}
    (Var m in the output's units, ``y_std^2`` times the GP's), "draws", "level", "method"}``,
    lists in the inputs' order."""
    tail = (1.0 - level) / 2

    def band(values: np.ndarray) -> dict:
        low, high = np.quantile(values, [tail, 1.0 - tail], axis=0)
        return {"mean": values.mean(0).tolist(), "low": low.tolist(), "high": high.tolist()}

    variance = band(per_draw["variance"][:, None] * y_std**2)
    return {
        "inputs": [i.name for i in space.inputs],
        "first": band(per_draw["first"]),
        "total": band(per_draw["total"]),
        "variance": {k: v[0] for k, v in variance.items()},
        "draws": len(per_draw["variance"]),
        "level": level,
        "method": method,
    }


def sobol_indices(
    space: Space, u, alpha, lengthscale, level: float = 0.95, y_std: float = 1.0
) -> dict:
    """The closed form's indices over the draws (:func:`closed_form`, :func:`summarize`)."""
    return summarize(closed_form(space, u, alpha, lengthscale), space, level, y_std=y_std)
