"""The counters every process adds to and ``/metrics`` reports (:mod:`service.observability`):
labels stored, failed and abandoned runs, and the refits' durations, kept in Redis under
``fbgp:metrics:*`` (:mod:`service.keys`) so that every API process reports the same totals and
they survive restarts."""

from __future__ import annotations

from dataclasses import dataclass

from fbgp_al.service.keys import LABELS_METRIC, REFIT_METRIC, RUNS_METRIC
from fbgp_al.service.store.noun import Noun

RUN_KINDS = ("failed", "abandoned")
REFIT_BUCKETS = (0.5, 1, 2, 5, 10, 20, 30, 60, 120, 300, 600)  # seconds


@dataclass(frozen=True)
class Totals:
    """The counters as they stand: labels stored, runs per kind (:data:`RUN_KINDS`), and the
    refits' histogram (``buckets``: each bound of :data:`REFIT_BUCKETS` and ``+Inf`` with its
    cumulative count, in order) and the sum of their seconds."""

    labels: float
    runs: dict[str, float]
    buckets: list[tuple[str, float]]
    refit_seconds: float


class Counters(Noun):
    """The shared counters, added to as the store records what they count."""

    def count_labels(self, count: int) -> None:
        self.r.incrby(LABELS_METRIC, count)

    def count_run(self, kind: str) -> None:
        """One more ticket whose run was reported ``failed`` or ``abandoned``."""
        self.r.hincrby(RUNS_METRIC, kind, 1)

    def count_refit(self, seconds: float) -> None:
        """One refit's duration in the shared histogram (cumulative buckets, as Prometheus)."""
        pipe = self.r.pipeline()
        for bound in REFIT_BUCKETS:
            if seconds <= bound:
                pipe.hincrby(REFIT_METRIC, str(bound), 1)
        pipe.hincrby(REFIT_METRIC, "+Inf", 1)
        pipe.hincrbyfloat(REFIT_METRIC, "sum", seconds)
        pipe.execute()

    def totals(self) -> Totals:
        """The counters, read in one round trip."""
        labels, runs, refits = (
            self.r.pipeline(transaction=False)
            .get(LABELS_METRIC)
            .hgetall(RUNS_METRIC)
            .hgetall(REFIT_METRIC)
            .execute()
        )
        runs = {k.decode(): float(v) for k, v in runs.items()}
        raw = {k.decode(): float(v) for k, v in refits.items()}
        bounds = [str(b) for b in REFIT_BUCKETS] + ["+Inf"]
        return Totals(
            float(labels or 0),
            {kind: runs.get(kind, 0.0) for kind in RUN_KINDS},
            [(bound, raw.get(bound, 0.0)) for bound in bounds],
            raw.get("sum", 0.0),
        )
