"""Where a posterior's cold chains start (see ``INITS``), and with what first guess of its
covariance: :func:`initial_points`, which :func:`worker.mcmc.run_chains` calls for chains that
do not start warm."""

from __future__ import annotations

import numpy as np
from scipy.optimize import minimize
from scipy.stats import qmc

from fbgp_al.worker.potential import PRIOR_VARIANCE, GPPotential

# Where cold chains start. "uniform": uniformly in [-2, 2] on every log-hyperparameter (Stan's
# and Pyro's default). "grid": from the posterior's modes in proportion to their mass. Candidates
# are a coarse grid (one lengthscale shared by all inputs, and the noise) and a Latin hypercube of
# per-input lengthscales over the same box (seeded); L-BFGS from the best distinct ones finds
# local modes; each is weighed by its Laplace mass (e^-U / sqrt(det H)), and each chain starts at
# a draw of that Laplace mixture: in the modes in proportion to their mass, dispersed as the
# posterior is, so that R-hat sees modes that chains split over. With one input the grid is the
# whole space, and chains start from its cells in proportion to their mass (exact where Laplace's
# approximation is not, for a skewed mode or a heavy tail). The uniform box can miss the
# main mode: with 60 Gramacy & Lee points the oscillating fit (log l = -3.2, log s2 = -5.3) has
# e^15.7 times the density of the smooth, noisy one near log l = -1.6, yet all 5 chains started
# in [-2, 2] stayed in the smooth one (R-hat 1.004: no warning). A shared lengthscale can miss it
# too: with the reproduction's first 100 Ishigami points the grid's best cells lead every chain
# into a mode with about 1/100 of the mass of one where the second input's lengthscale is long.
INIT_RADIUS = 2.0
INITS = ("grid", "uniform")
GRID_LOG_LENGTHSCALE = np.linspace(-6.0, 3.0, 25)
GRID_LOG_NOISE = np.linspace(-12.0, 3.0, 25)
START_CANDIDATES = 128  # Latin hypercube points beside the grid
START_CELLS = 2  # the grid's best cells, each input's lengthscale moved over the grid alone
START_OPTIMA = 12  # L-BFGS runs, from the best candidates at least START_SPACING apart
START_SPACING = 2.0  # in every log-hyperparameter
START_ITERATIONS = 40  # L-BFGS iterations per run
NEWTON_STEPS = 6  # Newton steps from a mode of a few labels fewer (:func:`newton`)
NEWTON_HALVINGS = 5
NEWTON_DECREMENT = 1e-6
# Past SEARCH_LABELS labels the search runs on that many of them, drawn at random (seeded), and
# each distinct minimum it finds (at least POLISH_SPACING apart in some log-hyperparameter) is
# then polished by L-BFGS on every label: a density costs n^3, and the search's ~450 densities
# and 12 runs cost (n / SEARCH_LABELS)^3 less on the subset (docs/benchmarks.md, "Thousands of
# labels").
SEARCH_LABELS = 400
POLISH_SPACING = 0.5


def initial_points(
    potential: GPPotential, chain_ids, seed: int, how: str
) -> tuple[np.ndarray, np.ndarray | None]:
    """Per chain, a starting point with a finite potential (see ``INITS``), drawn from a stream
    of its own (keyed by the chain's number, as in the sampler); the modes it is drawn from
    depend only on the data and ``seed``. And per chain a first guess of the posterior's
    covariance, its mode's Laplace covariance (``C x P x P``), where chains start from the
    modes (None for the grid of one input and the uniform start)."""
    if how not in INITS:
        raise ValueError(f"unknown init {how!r}; known: {', '.join(INITS)}")
    grid = _init_grid(potential) if how == "grid" and potential.dim == 2 else None
    modes = posterior_modes(potential, seed) if how == "grid" and grid is None else None
    init = np.empty((len(chain_ids), potential.dim))
    guess = None if modes is None else np.empty((len(chain_ids),) + (potential.dim,) * 2)
    for row, c in enumerate(chain_ids):
        rng = np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(int(c), 1)))
        if grid is not None:
            points, weights, half = grid
            init[row] = points[rng.choice(len(points), p=weights)]
            init[row] += rng.uniform(-half, half, potential.dim)
            if np.isfinite(potential(init[row : row + 1])[0]).all():
                continue
        if modes is not None:
            points, weights, scales = modes
            k = rng.choice(len(points), p=weights)
            guess[row] = scales[k] @ scales[k].T
            for _ in range(10):
                init[row] = points[k] + scales[k] @ rng.standard_normal(potential.dim)
                if np.isfinite(potential(init[row : row + 1])[0]).all():
                    break
            else:
                init[row] = points[k]
            continue
        for _ in range(100):
            init[row] = potential.prior_mean + rng.uniform(-INIT_RADIUS, INIT_RADIUS, potential.dim)
            if np.isfinite(potential(init[row : row + 1])[0]).all():
                break
    return init, guess


def _init_grid(potential: GPPotential):
    """Grid points (one lengthscale for all inputs, and the noise), their posterior weights,
    and the half-widths of a cell; None if no point has a finite potential."""
    a, b = np.meshgrid(GRID_LOG_LENGTHSCALE, GRID_LOG_NOISE, indexing="ij")
    d = potential.dim - 1
    points = np.column_stack([np.repeat(a.reshape(-1, 1), d, axis=1), b.reshape(-1)])
    points += potential.prior_mean  # the grid is laid around the priors' means
    values = np.concatenate([potential(chunk)[0] for chunk in np.array_split(points, 4)])
    if not np.isfinite(values).any():
        return None
    weights = np.exp(-(values - values[np.isfinite(values)].min()))
    weights = np.where(np.isfinite(weights), weights, 0.0)
    half = np.array(
        [(GRID_LOG_LENGTHSCALE[1] - GRID_LOG_LENGTHSCALE[0]) / 2] * d
        + [(GRID_LOG_NOISE[1] - GRID_LOG_NOISE[0]) / 2]
    )
    return points, weights / weights.sum(), half


def posterior_modes(potential: GPPotential, seed: int):
    """Local modes of the posterior (``K x P``), their Laplace masses (normalized), and
    per mode a matrix ``L`` with ``L L^T`` the inverse Hessian; None if no candidate has a finite
    potential. See ``INITS``."""
    found = local_minima(potential, seed)
    return None if found is None else laplace_mixture(potential, found)


def local_minima(potential: GPPotential, seed: int) -> list[tuple[float, np.ndarray]] | None:
    """The search of :func:`posterior_modes`: the local minima ``[(U, theta)]`` that L-BFGS
    reaches from the best-spread starts of a grid and a Latin hypercube, best first; None if no
    candidate has a finite potential. Past :data:`SEARCH_LABELS` labels, the search's minima on
    a random subset of them, each distinct one polished on all the labels."""
    if potential.n <= SEARCH_LABELS:
        return _search(potential, seed)
    rng = np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(4,)))
    rows = np.sort(rng.choice(potential.n, SEARCH_LABELS, replace=False))
    rough = _search(potential.subset(rows), seed)
    if rough is None:
        return _search(potential, seed)
    starts: list[np.ndarray] = []
    for _, theta in rough:  # best first
        if all(np.abs(theta - s).max() >= POLISH_SPACING for s in starts):
            starts.append(theta)
    bounds = search_bounds(potential)
    return sorted((descend(potential, x, bounds) for x in starts), key=lambda m: m[0])


def _search(potential: GPPotential, seed: int) -> list[tuple[float, np.ndarray]] | None:
    """The grid, the Latin hypercube and the L-BFGS runs of :func:`local_minima` on
    ``potential``'s labels."""
    d = potential.dim - 1
    # the search box and grid are laid around the priors' means
    centre = potential.prior_mean
    lo = centre + np.array([GRID_LOG_LENGTHSCALE[0]] * d + [GRID_LOG_NOISE[0]])
    hi = centre + np.array([GRID_LOG_LENGTHSCALE[-1]] * d + [GRID_LOG_NOISE[-1]])
    # every other grid value: the searches refine what the grid finds
    a, b = np.meshgrid(GRID_LOG_LENGTHSCALE[::2], GRID_LOG_NOISE[::2], indexing="ij")
    grid = np.column_stack([np.repeat(a.reshape(-1, 1), d, axis=1), b.reshape(-1)]) + centre
    grid_values = potential.values(grid)
    # one input's lengthscale at a time away from the grid's best cells
    axes = []
    for i in np.argsort(grid_values, kind="stable")[:START_CELLS]:
        for j in range(d):
            moved = np.repeat(grid[i][None], len(GRID_LOG_LENGTHSCALE[::2]), 0)
            moved[:, j] = centre[j] + GRID_LOG_LENGTHSCALE[::2]
            axes.append(moved)
    rng = np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(3,)))
    cube = lo + (hi - lo) * qmc.LatinHypercube(d=d + 1, rng=rng).random(START_CANDIDATES)
    extra = np.concatenate([cube, *axes])
    points = np.concatenate([grid, extra])
    values = np.concatenate([grid_values, potential.values(extra)])
    order = [i for i in np.argsort(values, kind="stable") if np.isfinite(values[i])]
    if not order:
        return None
    starts: list[np.ndarray] = []
    for i in order:
        if all(np.abs(points[i] - s).max() >= START_SPACING for s in starts):
            starts.append(points[i])
            if len(starts) == START_OPTIMA:
                break
    found = sorted(
        (descend(potential, x, search_bounds(potential)) for x in starts), key=lambda m: m[0]
    )
    return found


def search_bounds(potential: GPPotential) -> list[tuple[float, float]]:
    """The box the mode searches keep to: the grid's, 3 wider on every side, around the priors'
    means."""
    d = potential.dim - 1
    lo = potential.prior_mean + np.array([GRID_LOG_LENGTHSCALE[0]] * d + [GRID_LOG_NOISE[0]])
    hi = potential.prior_mean + np.array([GRID_LOG_LENGTHSCALE[-1]] * d + [GRID_LOG_NOISE[-1]])
    return list(zip(lo - 3.0, hi + 3.0, strict=True))


def laplace_mixture(potential: GPPotential, found, gaussians=None):
    """The Laplace mixture of local minima ``found`` (``[(U, theta)]``, best first): each a
    Gaussian with its Hessian's inverse (:func:`mode_gaussian`; or given, one per minimum or
    None, as ``gaussians``), weighed by its Laplace mass ``e^-U / sqrt(det H)``; one found
    within 3 sds of a better one is the same mode. Returns the modes (``K x P``), their weights
    (normalized) and per mode ``L`` with ``L L^T`` the inverse Hessian."""
    modes, masses, scales, hessians = [], [], [], []
    for i, (value, x) in enumerate(found):
        if any(near(x, y, h) for y, h in zip(modes, hessians, strict=True)):
            continue
        given = None if gaussians is None else gaussians[i]
        h, scale, half_log_det = mode_gaussian(potential, x) if given is None else given
        modes.append(x)
        hessians.append(h)
        masses.append(-value - half_log_det)
        scales.append(scale)
    weights = np.exp(np.array(masses) - max(masses))
    return np.array(modes), weights / weights.sum(), np.array(scales)


def mode_gaussian(potential: GPPotential, x: np.ndarray):
    """The Laplace Gaussian at a mode ``x`` (:func:`gaussian_of` its :func:`hessian`)."""
    return gaussian_of(hessian(potential, x))


def gaussian_of(h: np.ndarray):
    """The Laplace Gaussian of a Hessian ``h``: ``H``, ``L`` with ``L L^T = H^-1``, and
    ``log det H / 2``; no direction wider than the prior (where the likelihood is flat, or the
    search stopped short of the mode)."""
    eig, vec = np.linalg.eigh(h) if np.isfinite(h).all() else (np.zeros(len(h)), np.eye(len(h)))
    eig = np.maximum(eig, 1.0 / PRIOR_VARIANCE)
    return (vec * eig) @ vec.T, vec / np.sqrt(eig), 0.5 * float(np.log(eig).sum())


def newton(
    potential: GPPotential, x0: np.ndarray, h: np.ndarray, bounds, steps: int = NEWTON_STEPS
) -> tuple[float, np.ndarray] | None:
    """A local minimum of the potential from ``x0``, near it, by Newton steps with a fixed
    Hessian ``h`` (a mode's of a few labels fewer), each halved until it lowers the potential,
    within ``bounds``: ``(U, theta)`` once the Newton decrement ``g^T h^-1 g`` is below
    ``NEWTON_DECREMENT`` (the minimum within about a thousandth of a sd), in at most ``steps``;
    None where it is not (then :func:`descend` searches)."""
    low, high = np.array(bounds, dtype=np.float64).T
    inverse = np.linalg.inv(h)

    def f(x):
        value, grad = potential(x[None])
        return float(value[0]), grad[0]

    x = np.clip(x0, low, high)
    value, grad = f(x)
    for _ in range(steps + 1):
        if not np.isfinite(value):
            return None
        step = inverse @ grad
        if grad @ step < NEWTON_DECREMENT:
            return value, x
        for halving in range(NEWTON_HALVINGS):
            trial = np.clip(x - step / 2**halving, low, high)
            trial_value, trial_grad = f(trial)
            if trial_value <= value:
                break
        else:
            return None
        x, value, grad = trial, trial_value, trial_grad
    return None


def near(x: np.ndarray, mode: np.ndarray, h: np.ndarray) -> bool:
    """Whether ``x`` lies within 3 sds of ``mode``, whose Hessian is ``h``."""
    return bool((x - mode) @ h @ (x - mode) < 9.0)


def descend(
    potential: GPPotential, x0: np.ndarray, bounds, iterations: int = START_ITERATIONS
) -> tuple[float, np.ndarray]:
    """A local minimum of the potential from ``x0`` by L-BFGS (``iterations`` at most):
    ``(U, theta)``, or ``x0`` where the search found nothing better."""

    def f(x):
        value, grad = potential(x[None])
        return (float(value[0]), grad[0]) if np.isfinite(value[0]) else (1e300, grad[0] * 0.0)

    start = f(x0)[0]
    with np.errstate(all="ignore"):
        result = minimize(
            f, x0, jac=True, method="L-BFGS-B", bounds=bounds, options={"maxiter": iterations}
        )
    value = f(result.x)[0]
    return (value, result.x) if value <= start else (start, x0)


def hessian(potential: GPPotential, x: np.ndarray, step: float = 1e-4) -> np.ndarray:
    """The potential's Hessian at ``x`` by central differences of its gradient (one call)."""
    p = len(x)
    grad = potential(x + step * np.concatenate([np.eye(p), -np.eye(p)]))[1]
    h = (grad[:p] - grad[p:]).T / (2 * step)
    return (h + h.T) / 2
