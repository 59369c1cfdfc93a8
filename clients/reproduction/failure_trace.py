"""Where a campaign's later failures fall (``fbgp-al bench-failures --later FILE``): for each
run that failed after the design with a failure before it, the runs before it as the failure
model saw them.

A record of :func:`clients.reproduction.failure_regions.run_one` holds its first
``TRACED_RUNS`` runs in order (``runs_at``: pool coordinates and whether the run failed). For
each such later failure :func:`later_failures` gives the distance (in the unit cube of pool
coordinates) to the nearest earlier success and to the nearest earlier failure, how many
earlier successes lie nearer than that failure, and the failure model fitted on the runs
before it (:func:`worker.feasibility.campaign.fit_campaign`, the campaign's seed and options):
its P(success) and its weight (:meth:`worker.feasibility.campaign.FailureModel.weigh`) at the
failed point. A model that reads the runs by their nearness cannot foresee a failure whose
nearest earlier runs succeeded.
"""

from __future__ import annotations

import json

import numpy as np

from fbgp_al.worker.feasibility.campaign import fit_campaign
from fbgp_al.worker.vocabulary.space import Space

TRACED_RUNS = 500  # runs kept per record (a campaign without a failure model runs thousands)


def later_failures(record: dict, sim, failures: dict) -> list[dict]:
    """The later failures of one record (see the module's text) of a campaign of ``sim`` with
    the ``failures`` option it ran with."""
    runs = record.get("runs_at") or []
    u = np.array([coords for coords, _ in runs], dtype=np.float64).reshape(len(runs), -1)
    failed = np.array([bool(f) for _, f in runs])
    spec = {"inputs": sim.inputs(), "failures": failures}
    rows = []
    for k in np.flatnonzero(failed):
        if k < record["design_runs"] or not failed[:k].any():
            continue
        distance = np.sqrt(((u[:k] - u[k]) ** 2).sum(1))
        to_failure = float(distance[failed[:k]].min())
        succeeded = distance[~failed[:k]]
        x = sim.from_unit(u[: k + 1]).tolist()
        labels = [{"x": x[i]} for i in range(k) if not failed[i]]
        model = fit_campaign(spec, labels, [{"x": x[i]} for i in range(k) if failed[i]], 0)
        features = model_features(sim, u[k : k + 1])
        _, weight = model.weigh(features)
        rows.append(
            {
                "simulator": record["simulator"],
                "seed": record["seed"],
                "run": int(k),
                "to_success": float(succeeded.min()) if len(succeeded) else np.inf,
                "to_failure": to_failure,
                "successes_nearer": int((succeeded < to_failure).sum()),
                "p_success": float(model.p_success(features)[0]),
                "weight": float(weight[0]),
            }
        )
    return rows


def model_features(sim, u: np.ndarray) -> np.ndarray:
    """The failure model's features of pool coordinates ``u`` of ``sim``'s inputs."""
    return Space.of(sim.inputs()).to_gp(sim.from_unit(u).tolist())


def table(rows: list[dict]) -> str:
    """Markdown, one line per later failure."""
    lines = [
        "| case | seed | run | nearest earlier success | nearest earlier failure "
        "| successes nearer than that failure | P(success) | weight |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['simulator']} | {r['seed']} | {r['run']} | {r['to_success']:.2f} "
            f"| {r['to_failure']:.2f} | {r['successes_nearer']} | {r['p_success']:.3f} "
            f"| {r['weight']:.3f} |"
        )
    return "\n".join(lines)


def report(path: str, case_region, failures_option) -> str:
    """The table of every record in the JSONL file ``path`` with a failure model."""
    rows = []
    with open(path) as f:
        for line in f:
            record = json.loads(line)
            if record["model"] == "none":
                continue
            sim, _ = case_region(record["simulator"])
            rows += later_failures(record, sim, failures_option(record["model"]))
    return table(rows)
