"""What the routes check of a request's values against its campaign: its points fit the
inputs, its outputs and noise variances the campaign's outputs and noise model (422 otherwise)."""

from __future__ import annotations

from service.errors import Unprocessable
from service.schemas.inputs import check_points
from service.store import CampaignStore
from worker.spec.defaults import known_noise, output_names

KNOWN_NOISE = ('this campaign\'s labels carry their noise variance (its "noise" is '
               '{"type": "known"})')  # fmt: skip
LEARNED_NOISE = ('this campaign learns one noise level; to give each label its noise variance, '
                 'create the campaign with "noise": {"type": "known"}')  # fmt: skip


def check_noise(spec: dict, given: bool, field: str, what: str) -> None:
    """422 unless noise variances are given exactly in a campaign with known noise."""
    if known_noise(spec) and not given:
        raise Unprocessable(f"{field} is required: {KNOWN_NOISE}; send {what}")
    if given and not known_noise(spec):
        raise Unprocessable(f"{field}: {LEARNED_NOISE}")


def check_outputs(spec: dict, value, field: str):
    """A label's ``value`` (its ``y``, or its ``noise``) as the campaign stores it: a number in a
    single-output campaign; with several outputs an object with a number for each output, in
    the campaign's order. 422 naming ``field`` and the output missing or unknown otherwise."""
    names = output_names(spec)
    if names is None:
        if isinstance(value, dict):
            raise Unprocessable(f"{field}: this campaign has one output: a number (a campaign "
                                'declares several with "outputs")')  # fmt: skip
        return value
    listed = ", ".join(repr(n) for n in names)
    if not isinstance(value, dict):
        raise Unprocessable(f"{field}: this campaign has several outputs ({listed}): an object "
                            "{name: value} with a value for each")  # fmt: skip
    missing = [n for n in names if n not in value]
    if missing:
        raise Unprocessable(f"{field}: output {missing[0]!r} is missing (the campaign's "
                            f"outputs: {listed})")  # fmt: skip
    unknown = [n for n in value if n not in names]
    if unknown:
        raise Unprocessable(f"{field}: unknown output {unknown[0]!r} (the campaign's outputs: "
                            f"{listed})")  # fmt: skip
    return {n: float(value[n]) for n in names}


class LabelValues:
    """A posted label's values checked against its campaign's spec, as the store reads it
    (:meth:`service.store.labels.Labels.record_label` calls it): ``y`` (or ``y_replicates``)
    and ``noise`` as stored, or 422."""

    def __init__(self, body):
        self.body = body
        self.y = self.noise = None

    def __call__(self, spec: dict) -> tuple:
        body = self.body
        field = "y_replicates" if body.y_replicates is not None else "noise"
        check_noise(spec, body.noise is not None, field,
                    "noise (the variance of y) or y_replicates")  # fmt: skip
        self.y = check_outputs(spec, body.y, "y_replicates" if body.y_replicates is not None
                               else "y")  # fmt: skip
        self.noise = None if body.noise is None else check_outputs(spec, body.noise, field)
        return self.y, self.noise


def spec_with_points(store: CampaignStore, campaign_id: str, x: list) -> tuple[dict, list]:
    """The campaign's spec and ``x`` with each value as its input keeps it, once ``x`` is known
    to fit its inputs (422 otherwise)."""
    spec = store.spec(campaign_id)
    try:
        return spec, check_points(x, spec["inputs"])
    except ValueError as error:
        raise Unprocessable(str(error)) from None
