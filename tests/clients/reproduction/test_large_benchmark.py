"""The label-to-next-point case of ``fbgp-al bench-core --cases next``
(:mod:`clients.reproduction.large_benchmark`)."""

from fbgp_al.clients.reproduction.large_benchmark import time_next_point


def test_label_to_next_point_adds_up_its_parts_for_each_acquisition(capsys):
    rows = time_next_point(
        "branin", 12, "uniform", acquisitions=("b-qbc", "qb-mgp"), candidates=300
    )
    assert [r["acquisition"] for r in rows] == ["b-qbc", "qb-mgp"]
    for r in rows:
        assert r["total_s"] == r["refit_s"] + r["scoring_s"] + r["accuracy_s"]
        assert min(r["refit_s"], r["scoring_s"], r["accuracy_s"]) > 0
        assert r["gradient_evaluations"] > 0 and r["rhat"] < 1.1 and r["ess"] > 0
    assert rows[0]["refit_s"] == rows[1]["refit_s"]  # one refit, scored by each acquisition
    out = capsys.readouterr().out
    assert "branin n=12 uniform: warm refit" in out and "label to next point" in out
