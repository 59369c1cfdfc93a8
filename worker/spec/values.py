"""A label's values against its campaign: its outputs (a number, or an object with a number per
output) and its noise model (known noise variances, or a learned noise level). A value that does
not fit raises ``ValueError`` naming the field; the service answers it as a 422."""

from __future__ import annotations

from worker.spec.defaults import known_noise, output_names

KNOWN_NOISE = ('this campaign\'s labels carry their noise variance (its "noise" is '
               '{"type": "known"})')  # fmt: skip
LEARNED_NOISE = ('this campaign learns one noise level; to give each label its noise variance, '
                 'create the campaign with "noise": {"type": "known"}')  # fmt: skip


def check_noise(spec: dict, given: bool, field: str, what: str) -> None:
    """Noise variances given exactly in a campaign with known noise."""
    if known_noise(spec) and not given:
        raise ValueError(f"{field} is required: {KNOWN_NOISE}; send {what}")
    if given and not known_noise(spec):
        raise ValueError(f"{field}: {LEARNED_NOISE}")


def check_outputs(spec: dict, value, field: str):
    """A label's ``value`` (its ``y``, or its ``noise``) as the campaign stores it: a number in a
    single-output campaign; with several outputs an object with a number for each output, in
    the campaign's order. ``field`` and the output missing or unknown are named otherwise."""
    names = output_names(spec)
    if names is None:
        if isinstance(value, dict):
            raise ValueError(f"{field}: this campaign has one output: a number (a campaign "
                             'declares several with "outputs")')  # fmt: skip
        return value
    listed = ", ".join(repr(n) for n in names)
    if not isinstance(value, dict):
        raise ValueError(f"{field}: this campaign has several outputs ({listed}): an object "
                         "{name: value} with a value for each")  # fmt: skip
    missing = [n for n in names if n not in value]
    if missing:
        raise ValueError(f"{field}: output {missing[0]!r} is missing (the campaign's "
                         f"outputs: {listed})")  # fmt: skip
    unknown = [n for n in value if n not in names]
    if unknown:
        raise ValueError(f"{field}: unknown output {unknown[0]!r} (the campaign's outputs: "
                         f"{listed})")  # fmt: skip
    return {n: float(value[n]) for n in names}


def checked_rows(spec: dict, y: list, noise: list | None) -> tuple[list, list | None]:
    """Many labels' ``y`` and ``noise`` (an import, a test set) as the campaign stores them,
    each checked as :func:`check_outputs` checks one (``y[i]``, ``noise[i]``)."""
    checked = [check_outputs(spec, value, f"y[{i}]") for i, value in enumerate(y)]
    if noise is None:
        return checked, None
    return checked, [check_outputs(spec, value, f"noise[{i}]") for i, value in enumerate(noise)]


class LabelValues:
    """One posted label's ``y`` (or ``y_replicates``) and ``noise`` checked against its
    campaign's spec when the store has read it: ``values(spec)`` is ``(y, noise)`` as stored,
    and they are kept on the object for the answer."""

    def __init__(self, y, noise=None, replicates: bool = False):
        self.given = (y, noise)
        self.replicates = replicates
        self.y = self.noise = None

    def __call__(self, spec: dict) -> tuple:
        y, noise = self.given
        field = "y_replicates" if self.replicates else "noise"
        check_noise(spec, noise is not None, field, "noise (the variance of y) or y_replicates")
        self.y = check_outputs(spec, y, "y_replicates" if self.replicates else "y")
        self.noise = None if noise is None else check_outputs(spec, noise, field)
        return self.y, self.noise
