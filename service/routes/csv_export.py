"""A campaign's observations as CSV (``GET .../observations`` with ``Accept: text/csv``): one
row per label, then one per failed run, every cell of text a user wrote kept from being read as a
spreadsheet formula (OWASP's CSV injection advice)."""

from __future__ import annotations

import csv
import io
import re

from fbgp_al.worker.vocabulary.defaults import output_names

# what a spreadsheet may run as a formula (the full-width forms too, which some read as these)
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r", "\uff1d", "\uff0b", "\uff0d", "\uff20")
# a formula's start after a character that a reader might split cells on: a separator, or a
# line break (a reader that splits on another separator than the writer's sees no quotes, and
# starts a row at each line break inside a cell)
SPLIT_FORMULA = re.compile(
    r"([,;|\t\n\r\v\f\x1c-\x1e\x85\u2028\u2029]\s*)([=+\-@\uff1d\uff0b\uff0d\uff20])"
)


def _text_cell(text: str) -> str:
    """A CSV cell for text a user wrote (an input's name, a failure's reason): one that a
    spreadsheet would read as a formula gets a leading ``'`` (OWASP's CSV injection advice), and
    so does every part of it that a reader splitting on ``,``, ``;``, ``|`` or a tab, or at a
    line break, would make a cell of (``ok;=cmd|...`` reads ``ok;'=cmd|...``, and ``x\\n=1+1``
    ``x\\n'=1+1``), spaces before it or not, and full-width ``＝`` as ``=``. The writer quotes
    every text cell; numbers are written as they are."""
    text = SPLIT_FORMULA.sub(r"\1'\2", text)
    return "'" + text if text.lstrip().startswith(FORMULA_STARTS) else text


def _value_cell(value):
    """A CSV cell for a coordinate: a number as it is (the writer writes it as Python does,
    unquoted), a choice's text value as :func:`_text_cell` does."""
    return _text_cell(value) if isinstance(value, str) else value


def input_columns(spec: dict, service_columns: list[str]) -> list[str]:
    """The CSV export's input columns: each input's name (as :func:`_text_cell` writes it),
    but for one that a column of the service's (``y``, ``y_<output>``, ``noise``,
    ``status``, ``reason``) or another input's column has taken, ``input:<name>`` (prefixed
    again while that is taken too): a reader by column name never gets one for another."""
    taken = set(service_columns)
    out = []
    for spec_input in spec["inputs"]:
        column = _text_cell(spec_input["name"])
        while column in taken:
            column = "input:" + column
        taken.add(column)
        out.append(column)
    return out


def observations_csv(
    spec: dict, x: list[list], y: list, noise: list | None, failures: list[dict]
) -> str:
    """The CSV export: the inputs' columns (:func:`input_columns`), ``y`` (``y_<output>`` for
    each output), ``noise`` with known noise (``noise_<output>``), ``status`` and ``reason``;
    a row per label (``status`` ``ok``), then one per failed run (``status`` ``failed``, ``y``
    empty, the ``reason``)."""
    names = output_names(spec)
    out = io.StringIO()
    # every text cell in double quotes, numbers bare: a reader that splits on another
    # separator (a spreadsheet set to ";") cannot cut a cell open into a formula
    writer = csv.writer(out, quoting=csv.QUOTE_NONNUMERIC)
    if names is None:
        columns, extra = ["y"], ["noise"] if noise is not None else []
    else:  # y_<name> for each output, then noise_<name> for each
        columns = [f"y_{name}" for name in names]
        extra = [f"noise_{name}" for name in names] if noise is not None else []
    service_columns = [_text_cell(c) for c in [*columns, *extra, "status", "reason"]]
    writer.writerow(input_columns(spec, service_columns) + service_columns)
    for k, (xi, yi) in enumerate(zip(x, y, strict=True)):
        values = [yi] if names is None else [yi[name] for name in names]
        if noise is None:
            known = []
        else:
            known = [noise[k]] if names is None else [noise[k][name] for name in names]
        writer.writerow(
            [_value_cell(v) for v in xi] + [float(v) for v in values + known] + ["ok", ""]
        )
    for f in failures:
        empty = [""] * (len(columns) + len(extra))  # y, and its noise
        writer.writerow(
            [_value_cell(v) for v in f["x"]] + [*empty, "failed", _text_cell(f["reason"])]
        )
    return out.getvalue()
