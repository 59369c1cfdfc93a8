"""What a model answers at points a client sends: predictions, the acquisition's values, and
the metrics of ``/evaluate`` on a test set (:class:`service.schemas.labeling.Observations`)."""

from __future__ import annotations

from typing import Literal

from pydantic import ConfigDict, Field

from fbgp_al.service.schemas.fields import Acquisition, Free, Point, Strict


class Points(Strict):
    """Points at which to predict."""

    model_config = ConfigDict(
        json_schema_extra={"examples": [{"x": [[0.5, 2, "steel"], [0.9, 1, "titanium"]]}]}
    )

    x: list[Point] = Field(min_length=1, max_length=100_000)
    """The points, one value per input each, in the inputs' order (within the declared bounds)."""
    fidelity: str | None = Field(default=None, min_length=1, max_length=100)
    """In a campaign with fidelities: the level at which to answer (default the top level, the
    one the metamodel is for)."""


class AcquisitionRequest(Points):
    """Points to score, and the acquisition to score them with."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [{"x": [[0.5, 2, "steel"], [0.9, 1, "titanium"]], "acquisition": "b-qbc"}]
        }
    )

    acquisition: Acquisition | Literal["ivr"] | None = None
    """The acquisition (default: the campaign's)."""


class OutputPrediction(Free):
    """One output's predictions at the points, original units, one entry per point. An output
    modeled on the log scale (`"transform": "log"`) is lognormal under each GP: `mean` and
    `variance` are the lognormal's, `exp(mu + s^2/2)` and `(exp(s^2) - 1) exp(2 mu + s^2)` (`mu`,
    `s^2`: the GP's predictive mean and variance of log y), and its median and central 95%
    interval are given beside them (absent for an output modeled as is, whose median is its mean
    and interval its mean -+ 1.96 sd)."""

    mean: list[float]
    """The posterior-mode GP's mean of y (a log output: the lognormal's mean, not its median)."""
    variance: list[float]
    """Its variance of y, noise included (with known noise: the nugget; add a new point's own noise
    yourself)."""
    mixture_mean: list[float]
    """The mean of the equal-weight mixture of the acquisition draws' GPs (a log output: the mean
    of the draws' lognormal means)."""
    mixture_variance: list[float]
    """The mixture's variance of y: the draws' mean variance plus the variance of their means."""
    median: list[float] | None = None
    """A log output: the posterior-mode GP's median of y, `exp(mu)` (below its mean)."""
    lower: list[float] | None = None
    """A log output: the lower end of the mode GP's central 95% interval of y, `exp(mu - 1.96 s)`
    (its 2.5% quantile)."""
    upper: list[float] | None = None
    """A log output: the upper end, `exp(mu + 1.96 s)` (its 97.5% quantile)."""
    mixture_median: list[float] | None = None
    """A log output: the mixture's median of y, the exp of its median of log y."""
    mixture_lower: list[float] | None = None
    """A log output: the mixture's 2.5% quantile of y, the exp of its quantile of log y (exact:
    exp is increasing)."""
    mixture_upper: list[float] | None = None
    """A log output: the mixture's 97.5% quantile of y."""


class Prediction(OutputPrediction):
    """Predictions at the points (see `OutputPrediction`), and the model that answered."""

    fidelity: list[str] | None = None
    """In a campaign with fidelities: each prediction's level."""

    p_success: list[float] | None = None
    """The failure model's probability that a run at the point succeeds (absent when the model
    has no failure model: no run had failed, or the campaign's `failures` is `none`)."""
    model_version: int
    """The model that answered."""


class MultiPrediction(Free):
    """Predictions of a campaign with several outputs."""

    outputs: dict[str, OutputPrediction]
    """Each output's predictions, by name."""
    p_success: list[float] | None = None
    """The failure model's probability that a run at the point succeeds (one for all outputs;
    absent without a failure model)."""
    model_version: int
    """The model that answered."""


class AcquisitionValues(Free):
    """The acquisition's scores at the points (higher: chosen first)."""

    values: list[float]
    """One score per point, in standardized units (several outputs: the weighted sum)."""
    model_version: int
    """The model that answered."""


class Evaluation(Free):
    """The model's metrics on a test set."""

    nlml: float
    """Negative log marginal likelihood of the test labels under the mode GP's joint predictive,
    per point, standardized units."""
    rmse: float
    """RMSE of the mode GP's mean against the test labels, in the output's units."""
    nlpd_mixture: float
    """Mean negative log predictive density of the test labels under the mixture, standardized
    units (of log y for a log output)."""
    nlml_y: float | None = None
    """`nlml` as the density of y itself, in the output's units: plus log `y_std`, and for a log
    output the mean of log y (the Jacobian); comparable whatever the output's transform."""
    nlpd_mixture_y: float | None = None
    """`nlpd_mixture` as the density of y itself, in the output's units (the same Jacobian): the
    mixture's lognormal density for a log output."""
    # the test NLML as the paper's code computes it (noise counted twice, the mode's log prior)
    nlml_paper: float | None = None
    """The test NLML as the paper's code computes it (noise counted twice, the mode's log prior
    included)."""
    model_version: int
    """The model that answered."""


class OutputEvaluation(Free):
    """One output's metrics on the test set."""

    nlml: float
    """Negative log marginal likelihood per point, standardized units."""
    rmse: float
    """RMSE of the mode GP's mean, in the output's units."""
    nlpd_mixture: float
    """Mean negative log predictive density under the mixture, standardized units."""
    nlml_paper: float | None = None
    """The test NLML as the paper's code computes it."""
    nlml_y: float | None = None
    """`nlml` in the output's units (the density of y itself)."""
    nlpd_mixture_y: float | None = None
    """`nlpd_mixture` in the output's units (the density of y itself)."""


class MultiEvaluation(Free):
    """Metrics of a campaign with several outputs."""

    outputs: dict[str, OutputEvaluation]
    """Each output's metrics, by name."""
    model_version: int
    """The model that answered."""
