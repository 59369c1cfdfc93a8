"""A label's values against its campaign: its outputs (a number, or an object with a number per
output; > 0 for an output declared ``"transform": "log"``) and its noise model (known noise
variances, or a learned noise level). A value that does not fit raises ``ValueError`` naming the
field; the service answers it as a 422."""

from __future__ import annotations

from fbgp_al.worker.vocabulary.defaults import known_noise, log_outputs, output_names

KNOWN_NOISE = (
    'this campaign\'s labels carry their noise variance (its "noise" is {"type": "known"})'
)
LEARNED_NOISE = (
    "this campaign learns one noise level; to give each label its noise variance, "
    'create the campaign with "noise": {"type": "known"}'
)


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
            raise ValueError(
                f"{field}: this campaign has one output: a number (a campaign "
                'declares several with "outputs")'
            )
        return value
    listed = ", ".join(repr(n) for n in names)
    if not isinstance(value, dict):
        raise ValueError(
            f"{field}: this campaign has several outputs ({listed}): an object "
            "{name: value} with a value for each"
        )
    missing = [n for n in names if n not in value]
    if missing:
        raise ValueError(
            f"{field}: output {missing[0]!r} is missing (the campaign's outputs: {listed})"
        )
    unknown = [n for n in value if n not in names]
    if unknown:
        raise ValueError(
            f"{field}: unknown output {unknown[0]!r} (the campaign's outputs: {listed})"
        )
    return {n: float(value[n]) for n in names}


def check_positive(spec: dict, value, field: str) -> None:
    """A label's ``y`` as stored (a number, or ``{name: number}``), or its ``y_replicates`` (a
    list, or ``{name: list}``), against the outputs declared ``log``: a ``ValueError`` naming
    ``field``, the output and the value unless each of their values is > 0."""
    for name in log_outputs(spec):
        given = value if name is None else value[name]
        for v in given if isinstance(given, list) else [given]:
            if not float(v) > 0:
                where = "this campaign's output is" if name is None else f"output {name!r} is"
                at = field if name is None else f"{field}[{name!r}]"
                raise ValueError(
                    f'{at}: {where} declared "transform": "log" (modeled on the '
                    f"log scale), so its values must be > 0; got {v!r}"
                )


def checked_rows(spec: dict, y: list, noise: list | None) -> tuple[list, list | None]:
    """Many labels' ``y`` and ``noise`` (an import, a test set) as the campaign stores them,
    each checked as :func:`check_outputs` checks one (``y[i]``, ``noise[i]``), each ``y`` by
    :func:`check_positive` too."""
    checked = [check_outputs(spec, value, f"y[{i}]") for i, value in enumerate(y)]
    for i, value in enumerate(checked):
        check_positive(spec, value, f"y[{i}]")
    if noise is None:
        return checked, None
    return checked, [check_outputs(spec, value, f"noise[{i}]") for i, value in enumerate(noise)]


class LabelValues:
    """One posted label's ``y`` (or ``y_replicates``) and ``noise`` checked against its
    campaign's spec when the store has read it: ``values(spec)`` is ``(y, noise)`` as stored,
    and they are kept on the object for the answer. ``replicates``: the posted
    ``y_replicates`` (``y`` and ``noise`` their moments), each checked by
    :func:`check_positive`, or whether there were some."""

    def __init__(self, y, noise=None, replicates=False):
        self.given = (y, noise)
        self.replicates = replicates
        self.y = self.noise = None

    def __call__(self, spec: dict) -> tuple:
        y, noise = self.given
        field = "y_replicates" if self.replicates else "noise"
        check_noise(spec, noise is not None, field, "noise (the variance of y) or y_replicates")
        self.y = check_outputs(spec, y, "y_replicates" if self.replicates else "y")
        given = self.replicates if isinstance(self.replicates, (list, dict)) else self.y
        check_positive(spec, given, "y_replicates" if self.replicates else "y")
        self.noise = None if noise is None else check_outputs(spec, noise, field)
        return self.y, self.noise
