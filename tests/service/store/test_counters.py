"""The counters every process adds to and ``/metrics`` reports (:mod:`service.store.counters`),
in the tests' Redis: labels, runs by kind, and the refits' durations as a cumulative
histogram."""

import pytest

from fbgp_al.service.keys import LABELS_METRIC, REFIT_METRIC, RUNS_METRIC
from fbgp_al.service.store.counters import REFIT_BUCKETS


def test_counts_add_up_across_stores(bare_store):
    store = bare_store
    store.r.delete(LABELS_METRIC, RUNS_METRIC, REFIT_METRIC)
    store.counters.count_labels(3)
    store.counters.count_labels(2)
    for kind in ("failed", "failed", "abandoned"):
        store.counters.count_run(kind)
    assert int(store.r.get(LABELS_METRIC)) == 5
    assert store.r.hgetall(RUNS_METRIC) == {b"failed": b"2", b"abandoned": b"1"}


def test_a_refit_s_duration_counts_in_every_bucket_it_fits(bare_store):
    store = bare_store
    store.r.delete(REFIT_METRIC)
    for seconds in (0.2, 3.0, 5.0, 1000.0):
        store.counters.count_refit(seconds)
    got = {k.decode(): float(v) for k, v in store.r.hgetall(REFIT_METRIC).items()}
    for bound in REFIT_BUCKETS:  # cumulative, as Prometheus: le="5" counts 0.2, 3 and 5
        expected = sum(s <= bound for s in (0.2, 3.0, 5.0, 1000.0))
        assert got.get(str(bound), 0) == expected, bound
    assert got["+Inf"] == 4
    assert got["sum"] == pytest.approx(1008.2)


def test_the_totals_read_back_what_was_counted(bare_store):
    store = bare_store
    store.r.delete(LABELS_METRIC, RUNS_METRIC, REFIT_METRIC)
    empty = store.counters.totals()
    assert empty.labels == 0 and empty.runs == {"failed": 0.0, "abandoned": 0.0}
    assert [b for b, _ in empty.buckets] == [str(b) for b in REFIT_BUCKETS] + ["+Inf"]
    store.counters.count_labels(4)
    store.counters.count_run("abandoned")
    for seconds in (0.2, 7.0):
        store.counters.count_refit(seconds)
    totals = store.counters.totals()
    assert totals.labels == 4 and totals.runs == {"failed": 0.0, "abandoned": 1.0}
    counts = dict(totals.buckets)
    assert (counts["0.5"], counts["5"], counts["10"], counts["+Inf"]) == (1, 1, 2, 2)
    assert totals.refit_seconds == pytest.approx(7.2)
