"""What a model answers at points a client sends: predictions, the acquisition's values, and
the metrics of ``/evaluate`` on a test set (:class:`service.schemas.labeling.Observations`)."""

from __future__ import annotations

from pydantic import ConfigDict, Field

from service.schemas.fields import Acquisition, Free, Point, Strict


class Points(Strict):
    """Points at which to predict."""

    model_config = ConfigDict(
        json_schema_extra={"examples": [{"x": [[0.5, 2, "steel"], [0.9, 1, "titanium"]]}]}
    )

    x: list[Point] = Field(min_length=1, max_length=100_000)
    """The points, one value per input each, in the inputs' order (within the declared bounds)."""


class AcquisitionRequest(Points):
    """Points to score, and the acquisition to score them with."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [{"x": [[0.5, 2, "steel"], [0.9, 1, "titanium"]], "acquisition": "b-qbc"}]
        }
    )

    acquisition: Acquisition | None = None
    """The acquisition (default: the campaign's)."""


class Prediction(Free):
    """Predictions at the points, original units, one entry per point."""

    mean: list[float]
    """The posterior-mode GP's mean of y."""
    variance: list[float]
    """Its variance of y, noise included (with known noise: the nugget; add a new point's own noise
    yourself)."""
    mixture_mean: list[float]
    """The mean of the equal-weight mixture of the acquisition draws' GPs."""
    mixture_variance: list[float]
    """The mixture's variance of y: the draws' mean variance plus the variance of their means."""
    p_success: list[float] | None = None
    """The failure model's probability that a run at the point succeeds (absent when the model
    has no failure model: no run had failed, or the campaign's `failures` is `none`)."""
    model_version: int
    """The model that answered."""


class OutputPrediction(Free):
    """One output's predictions, original units."""

    mean: list[float]
    """The posterior-mode GP's mean of y."""
    variance: list[float]
    """Its variance of y, noise included."""
    mixture_mean: list[float]
    """The mixture's mean."""
    mixture_variance: list[float]
    """The mixture's variance."""


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
    units."""
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


class MultiEvaluation(Free):
    """Metrics of a campaign with several outputs."""

    outputs: dict[str, OutputEvaluation]
    """Each output's metrics, by name."""
    model_version: int
    """The model that answered."""
