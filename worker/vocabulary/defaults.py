"""The campaign vocabulary, one definition each: acquisition names, MCMC settings and presets,
pool and batch rules. The schemas, the math and the tooling all read them from here.

Plain Python (no torch, no numpy), so the API imports it without the math's dependencies.
"""

from __future__ import annotations

# every acquisition a campaign may name (the OpenAPI document's campaign body), and `bald-code`,
# BALD as the paper's code computes it (the log of the mean latent standard deviation; `bald-std` is
# its earlier name)
ACQUISITIONS: tuple[str, ...] = (
    "alm",
    "b-alm",
    "bald",
    "b-qbc",
    "qb-mgp",
    "random",
    "bald-code",
    "bald-std",
)
# the five the paper compares, and the one its RD-AUC is relative to
PAPER_ACQUISITIONS: tuple[str, ...] = ("alm", "b-alm", "bald", "b-qbc", "qb-mgp")
BASELINE = "alm"
DEFAULT_ACQUISITION = "qb-mgp"
# a campaign with fidelities: the top level's integrated variance removed per unit cost (`ivr`,
# its default), or the paper's disagreements at the top level with the level chosen by `ivr`
# (worker.fidelity.acquisition)
FIDELITY_ACQUISITIONS: tuple[str, ...] = ("ivr", "qb-mgp", "b-qbc", "b-alm")

# a campaign's `mcmc` settings when it names none: sampling to a target. 150 draws are used for
# scoring (as in the paper: 5 chains x 300 draws, every 10th); the 5 chains run 60 draws each
# after warm-up, then more until those 150 draws are backed by a bulk ESS of at least 150, or
# until 1,000 draws per chain. R-hat is reported, not waited for (`target_rhat` null): on a
# posterior with several modes no number of draws brings it down, and at n = 200 in 6-D waiting
# for 1.01 made a warm refit 1.4x longer in the median (3.5x at worst) for the same next point
# in 8 of 9 seeds (docs/benchmarks.md, "When sampling stops"); a refit
# whose R-hat is above 1.05 does not start the next one warm. Refits start warm (the previous
# model's last draws, step sizes and mass matrices) with 50 iterations of step-size warm-up;
# cold chains start from the posterior grid. The noise variance is at least 1e-6 of the labels'
# variance (`noise_floor`, worker.potential): labels of a deterministic simulator otherwise drive
# it to where the covariance is singular to rounding and the sampler stalls. 1e-6 is the jitter
# the paper's code adds (Pyro's GPRegression) and BoTorch's fully Bayesian GP's noise floor.
MCMC_DEFAULTS: dict = {
    "chains": 5,
    "warmup": 100,
    "samples": 60,
    "thinning": 2,
    "warm_start": True,
    "warm_warmup": 50,
    "init": "grid",
    "draws": 150,
    "target_rhat": None,
    "max_samples": 1000,
    "metric": "diag",
    "start_metric": True,
    "noise_floor": 1e-6,
    "laplace_from": 200,
}
# the paper's settings, every refit from a cold start with the full warm-up and Pyro's default
# initialization, as it ran them
_PAPER = {
    "chains": 5,
    "warmup": 200,
    "samples": 300,
    "thinning": 10,
    "warm_start": False,
    "start_metric": False,
    "laplace_from": None,
}
MCMC_PRESETS: dict[str, dict] = {
    "paper": {**_PAPER, "init": "uniform"},
    # the paper's settings with the mode picked as the paper's code picks it: the densest draw
    # under a KDE of bandwidth 0.3 on the raw hyperparameters (worker.mode.mode_index)
    "paper-code": {**_PAPER, "init": "uniform", "mode_rule": "kde-raw"},
    # the paper's settings with the chains started where the service starts them by default:
    # spread over the modes of a coarse posterior grid (worker.cold_start), not in Pyro's
    # [-2, 2] box
    "paper-grid": {**_PAPER, "init": "grid"},
    # the service's defaults before sampling to a target: the paper's fixed count, warm-started
    "fixed": {**_PAPER, "warm_start": True, "warm_warmup": 50, "init": "grid"},
    # the defaults: sampling to a target (above)
    "target": dict(MCMC_DEFAULTS),
    # quick checks: a rough posterior in a fraction of the time
    "fast": {"chains": 2, "warmup": 50, "samples": 50, "thinning": 5},
    # the demo campaign of `fbgp-al up --demo`: seconds per refit
    "demo": {"chains": 4, "warmup": 100, "samples": 100, "thinning": 5},
}

INITIAL_DESIGN_SIZE = 3  # a maximin Latin hypercube of this many points, snapped to the pool
POOL_SUBSAMPLE = 10_000  # each scoring ranks a fresh random subset of a larger pool
RANKING_SIZE = 64  # ranked points kept with a model, best first (sequential mode)
MAX_BATCH = 32  # the longest greedy batch of a parallel-mode campaign

# what a model's `accuracy` reports that a stopping rule may name (all of them: lower is better);
# the `..._relative` ones relative to the labels' standard deviation (variance for ipv, ipv_f, qbc)
STOP_TARGETS: tuple[str, ...] = (
    "loo_rmse",
    "loo_rmse_relative",
    "ipv",
    "ipv_relative",
    "ipv_f",
    "ipv_f_relative",
    "qbc",
    "qbc_relative",
)
STOP_PATIENCE = 2  # consecutive models that must meet a target


# a campaign's `noise`: "learned" (one noise variance s2 for all labels, sampled with the
# lengthscales) or "known" (each label carries its own noise variance; the sampled s2 is a
# nugget added on top)
NOISE_TYPES: tuple[str, ...] = ("learned", "known")


def known_noise(spec: dict) -> bool:
    """Whether a campaign's labels carry their noise variances (specs made before the option
    existed learn one noise level)."""
    return (spec.get("noise") or {}).get("type") == "known"


# a campaign's `failures`: its failure model. "classifier": a GP classifier of the
# runs' success, fitted at each refit once a run has failed, weighs every candidate's score by its
# probability of success, and no candidate below `min_success` is handed out; "none": failed runs
# are kept and counted, no model sees them (the behavior before the option, and the paper's)
FAILURE_MODELS: tuple[str, ...] = ("classifier", "none")
MIN_SUCCESS = 0.5  # see docs/guides/failures.md, "The failure model", for why this default
# the quantile of a candidate's chance of success (under the failure model's posterior) that
# weighs its acquisition score (docs/benchmarks.md, "A crash region from a few crashes")
WEIGHT_QUANTILE = 0.1
# a failed and a successful run at most this far apart (the unit cube, the GP's features) bracket
# the region's border: the candidates between them are weighed by their median chance of success
# (docs/benchmarks.md, "Common noise, the labels' own error, and a border bracketed by a failure
# and a success")
BRACKET = 0.05


def failure_options(spec: dict) -> tuple[str, float, float, float]:
    """A campaign's failure model, ``min_success``, ``weight_quantile`` and ``bracket``; specs
    made before an option existed get its default (a campaign without a failed run pays nothing
    and ranks as before)."""
    options = spec.get("failures") or {}
    return (
        str(options.get("model", FAILURE_MODELS[0])),
        float(options.get("min_success", MIN_SUCCESS)),
        float(options.get("weight_quantile", WEIGHT_QUANTILE)),
        float(options.get("bracket", BRACKET)),
    )


# a campaign's `search`: with "polish", each refit climbs the acquisition over the box from its
# `starts` best candidates (worker.polish) and hands out the best point reached, a point of the
# box rather than of the pool; off by default but for a continuous pool (docs/benchmarks.md,
# "The next point anywhere in the box")
SEARCH_STARTS = 5
MAX_STARTS = 64


def search_options(spec: dict) -> tuple[bool, int]:
    """A campaign's ``search``: whether its refits polish their best candidates (by default
    only a continuous pool's; specs made before the option existed do not), and from how
    many."""
    options = spec.get("search") or {}
    polish = options.get("polish")
    if polish is None:  # not said: a continuous pool's refits polish, another's do not
        polish = (spec.get("pool") or {}).get("type") == "continuous"
    return bool(polish), int(options.get("starts", SEARCH_STARTS))


# a campaign's `outputs`: named outputs of one simulation, each with its own GP (2 to this many)
MAX_OUTPUTS = 16


def output_names(spec: dict) -> list[str] | None:
    """A multi-output campaign's output names, in order (None: one output, ``y`` a number)."""
    outputs = spec.get("outputs")
    return [o["name"] for o in outputs] if outputs else None


def output_weights(spec: dict) -> list[float]:
    """The weights of a multi-output campaign's outputs in its acquisition (default 1)."""
    return [float(o.get("weight") or 1.0) for o in spec["outputs"]]


# an output's `transform`: "none" (the GP models y) or "log" (it models log y: an output that
# is positive and spans orders of magnitude; its labels must be > 0)
OUTPUT_TRANSFORMS: tuple[str, ...] = ("none", "log")


def output_transform(spec: dict, name: str | None = None) -> str:
    """The ``transform`` of output ``name``, or of a single-output campaign's one output (None);
    specs made before the option existed model their outputs as they are (``none``)."""
    if name is None:
        return str(spec.get("transform") or "none")
    declared = next(o for o in spec["outputs"] if o["name"] == name)
    return str(declared.get("transform") or "none")


def log_outputs(spec: dict) -> list[str | None]:
    """The outputs declared ``"transform": "log"``: their names, or ``[None]`` for a
    single-output campaign's one output."""
    names = output_names(spec)
    if names is None:
        return [None] if output_transform(spec) == "log" else []
    return [name for name in names if output_transform(spec, name) == "log"]


def output_spec(spec: dict, k: int) -> dict:
    """Output ``k``'s campaign: the single-output campaign whose refits give output ``k``'s
    posterior, the same but for its seed, ``(seed + k) mod 2^32`` (output 0's is the campaign's
    own), with the output's ``transform``."""
    single = {key: value for key, value in spec.items() if key not in ("outputs", "transform")}
    single["seed"] = (int(spec["seed"]) + k) % 2**32
    transform = spec["outputs"][k].get("transform") or "none"
    if transform != "none":
        single["transform"] = transform
    return single


def output_labels(labels: list[dict], name: str) -> list[dict]:
    """Labels of a multi-output campaign as output ``name``'s single-output labels: ``y`` (and
    ``noise`` when known) its value."""
    out = []
    for label in labels:
        single = dict(label, y=label["y"][name])
        if isinstance(label.get("noise"), dict):
            single["noise"] = label["noise"][name]
        out.append(single)
    return out


def output_units(spec: dict, name: str | None = None) -> str | None:
    """Output ``name``'s declared ``units`` (default: the first output's), or None (none
    declared, or a single output)."""
    outputs = spec.get("outputs")
    if not outputs:
        return None
    chosen = next((o for o in outputs if o["name"] == name), outputs[0])
    return chosen.get("units") or None


def output_title(spec: dict, name: str | None = None) -> str:
    """An output as the pictures and pages name it: output ``name`` of a multi-output campaign
    (default: the first), with its ``units`` in brackets where declared; a single output's
    ``y``."""
    outputs = spec.get("outputs")
    if not outputs:
        return "y"
    chosen = next((o for o in outputs if o["name"] == name), outputs[0])
    units = output_units(spec, chosen["name"])
    return f"{chosen['name']} [{units}]" if units else chosen["name"]
