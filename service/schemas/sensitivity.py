"""``GET .../sensitivity``'s answer: which inputs matter, as Sobol indices of the model's mean
with credible intervals over the posterior's draws."""

from __future__ import annotations

from fbgp_al.service.schemas.fields import Body


class Interval(Body):
    """An index of each input (in the order of `inputs`), over the posterior's draws."""

    mean: list[float]
    """Its mean over the draws."""
    low: list[float]
    """The lower end of its credible interval (the draws' quantile at (1 - `level`) / 2)."""
    high: list[float]
    """The upper end of its credible interval (the draws' quantile at (1 + `level`) / 2)."""


class Band(Body):
    """A quantity over the posterior's draws."""

    mean: float
    """Its mean over the draws."""
    low: float
    """The lower end of its credible interval."""
    high: float
    """The upper end of its credible interval."""


class Sensitivity(Body):
    """The model mean's Sobol indices, each input uniform over its range (a log input on the log
    scale, an int input over its integers, a choice over its values, as one input). An output
    modeled on the log scale (`"transform": "log"`): the indices of its model's mean of log y,
    the scale the GP models (where the closed form is exact)."""

    inputs: list[str]
    """The inputs, in the order of the indices."""
    first: Interval
    """First-order indices: the share of the mean's variance that each input explains alone."""
    total: Interval
    """Total indices: the share of the variance that involves each input, alone or with others
    (1 minus the share the other inputs explain together)."""
    variance: Band
    """The mean's variance over the inputs' ranges, in the output's units squared (an output
    modeled on the log scale: of the mean of log y, whose indices these are)."""
    draws: int
    """The posterior draws the indices were computed on."""
    level: float
    """The credible intervals' probability."""
    method: str
    """`closed-form` (exact for the squared-exponential kernel) or `monte-carlo`."""
    model_version: int | None = None
    """The model they are of."""


class MultiSensitivity(Body):
    """A campaign with several outputs: each output's indices, on its own posterior."""

    outputs: dict[str, Sensitivity]
    """The indices of each output, by name."""
    model_version: int | None = None
    """The model they are of."""
