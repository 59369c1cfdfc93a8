"""The benchmark results file: JSON lines, one record per scored model of one run.

Each line is a JSON object for one (simulator, acquisition, run, n_labeled):

| field | type | meaning |
|---|---|---|
| ``simulator`` | str | a name from :data:`clients.simulators.SIMULATORS` |
| ``acquisition`` | str | ``alm``, ``b-alm``, ``bald``, ``b-qbc``, ``qb-mgp``, ``random`` |
| ``run`` | int | run index r (run r shares its initial design and test set across acquisitions) |
| ``n_labeled`` | int | labels the scored model was fitted on (3 initial + iterations so far) |
| ``nlml`` | float | NLML on the run's test set (``/evaluate``), standardized units |
| ``rmse`` | float | RMSE of the mode's mean against the true mean, original units |

Optional fields: ``nlpd_mixture`` (float); ``x`` (list of input vectors, original units: the
points labeled since the previous record of the run, so the first record carries the initial
design); ``y`` (their labels); ``seconds`` (float, wall time of the iteration);
``finished_at`` (float, Unix time when the iteration ended); ``workers`` (int, the service's
workers when the run started); ``max_labels`` (int, the labels the run ends with: 3 initial
plus its iterations); ``nlml_paper`` (float, the test NLML as the paper's code computes it,
where the service sends it); the run's protocol settings, ``protocol``, ``mcmc``,
``allow_repeats``, ``service_acquisition`` (the campaign's acquisition: ``bald`` may run
``bald-code``), ``input_scaling`` and ``initial_design``
(:data:`clients.reproduction.runs.SETTINGS`); anything else is kept and ignored. A run's
learning curve is its records ordered by ``n_labeled``; a later record with the same key
replaces an earlier one (a resumed benchmark may rewrite a step).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

REQUIRED = ("simulator", "acquisition", "run", "n_labeled", "nlml", "rmse")
METRICS = ("nlml", "rmse")


def validate(record: dict) -> dict:
    """``record`` if it has every required field with a usable type; ValueError otherwise."""
    missing = [k for k in REQUIRED if k not in record]
    if missing:
        raise ValueError(f"results record lacks {missing}: {record}")
    if not isinstance(record["run"], int) or not isinstance(record["n_labeled"], int):
        raise ValueError(f"run and n_labeled must be integers: {record}")
    for metric in METRICS:
        float(record[metric])
    return record


def run_key(record: dict) -> tuple[str, str, int]:
    """The run a record belongs to: ``(simulator, acquisition, run)``."""
    return (record["simulator"], record["acquisition"], record["run"])


def append_record(path: str | Path, record: dict) -> None:
    """Append one validated record as a line of ``path`` (created if absent)."""
    line = json.dumps(validate(record), separators=(",", ":"))
    with open(path, "a", encoding="utf-8") as f:
        f.write(line + "\n")


def read_results(path: str | Path) -> list[dict]:
    """All records of a results file; blank lines are skipped, later duplicates win."""
    by_key: dict[tuple, dict] = {}
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                record = validate(json.loads(line))
            except (json.JSONDecodeError, ValueError) as err:
                raise ValueError(f"{path}:{number}: {err}") from None
            by_key[(*run_key(record), record["n_labeled"])] = record
    return list(by_key.values())


@dataclass(frozen=True)
class Curves:
    """Learning curves of one (simulator, acquisition) on a common x-axis.

    ``n_labeled`` ``[T]``; ``values`` ``[R, T]`` (one row per run); ``runs`` ``[R]`` run indices.
    """

    n_labeled: np.ndarray
    values: np.ndarray
    runs: np.ndarray


def finished(records: list[dict]) -> tuple[list[dict], list[tuple[str, str, int]]]:
    """The records of finished runs, and the runs left out (in progress, or stopped early),
    which would otherwise cut every curve of their simulator short.

    A run is finished when it reached the ``max_labels`` its records carry; a run whose
    records carry none (older files) when it reached the largest ``n_labeled`` of its
    simulator."""
    reached: dict[tuple, int] = {}
    target: dict[tuple, int] = {}
    for r in records:
        key = run_key(r)
        reached[key] = max(reached.get(key, 0), r["n_labeled"])
        if "max_labels" in r:
            target[key] = max(target.get(key, 0), int(r["max_labels"]))
    longest: dict[str, int] = {}
    for (sim, _, _), n in reached.items():
        longest[sim] = max(longest.get(sim, 0), n)
    short = sorted(k for k, n in reached.items() if n < target.get(k, longest[k[0]]))
    left_out = set(short)
    kept = [r for r in records if run_key(r) not in left_out]
    return kept, short


def learning_curves(records: list[dict], metric: str) -> dict[str, dict[str, Curves]]:
    """``{simulator: {acquisition: Curves}}`` for ``metric`` (``"nlml"`` or ``"rmse"``).

    All curves of one simulator are cut to the ``n_labeled`` values that every one of its runs
    reached, so that areas under them are comparable (a run that stopped early shortens them all).
    """
    table: dict[str, dict[str, dict[int, dict[int, float]]]] = {}
    for r in records:
        runs = table.setdefault(r["simulator"], {}).setdefault(r["acquisition"], {})
        runs.setdefault(r["run"], {})[r["n_labeled"]] = float(r[metric])

    out: dict[str, dict[str, Curves]] = {}
    for sim, by_acq in table.items():
        all_runs = [curve for runs in by_acq.values() for curve in runs.values()]
        common = sorted(set.intersection(*(set(c) for c in all_runs)))
        out[sim] = {}
        for acq, runs in sorted(by_acq.items()):
            order = sorted(runs)
            values = np.array([[runs[r][n] for n in common] for r in order], dtype=float)
            out[sim][acq] = Curves(
                np.array(common, dtype=int),
                values.reshape(len(order), -1),
                np.array(order, dtype=int),
            )
    return out


def labeled_points(
    records: list[dict], simulator: str, acquisition: str, run: int
) -> tuple[np.ndarray, np.ndarray | None]:
    """The inputs ``[n, d]`` (and labels ``[n]``, or None) a run labeled, in order.

    Built from the optional ``x``/``y`` fields; empty ``[0, 0]`` when the run recorded none.
    """
    steps = sorted(
        (
            r
            for r in records
            if (r["simulator"], r["acquisition"], r["run"]) == (simulator, acquisition, run)
        ),
        key=lambda r: r["n_labeled"],
    )
    xs = [np.atleast_2d(np.asarray(r["x"], dtype=float)) for r in steps if r.get("x")]
    if not xs:
        return np.empty((0, 0)), None
    X = np.concatenate(xs)
    has_y = all("y" in r for r in steps if r.get("x"))
    y = np.concatenate([np.atleast_1d(r["y"]) for r in steps if r.get("x")]) if has_y else None
    return X, (None if y is None else y.astype(float))


def wall_seconds(records: list[dict]) -> tuple[float, int]:
    """Seconds during which at least one iteration was running, and how many records say when
    they ran: the length of the union of ``[finished_at - seconds, finished_at]`` over the
    records that carry both (campaigns that ran side by side count once)."""
    spans = sorted(
        (float(r["finished_at"]) - float(r["seconds"]), float(r["finished_at"]))
        for r in records
        if "finished_at" in r and "seconds" in r
    )
    total, end = 0.0, -np.inf
    for lo, hi in spans:
        if hi > end:
            total += hi - max(lo, end)
            end = hi
    return total, len(spans)
