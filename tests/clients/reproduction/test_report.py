"""The benchmark's report (:mod:`clients.reproduction.report`): the runs whose area one model
holds."""

import pytest

from fbgp_al.clients.reproduction.report import dominant_markdown, dominant_models


def _curve(acq: str, run: int, nlml: list[float], nlpd: float = 2.0) -> list[dict]:
    return [
        {
            "simulator": "hartmann6",
            "acquisition": acq,
            "run": run,
            "n_labeled": 3 + i,
            "nlml": v,
            "nlml_paper": v / 2,
            "nlpd_mixture": nlpd,
        }
        for i, v in enumerate(nlml)
    ]


def test_runs_whose_area_one_model_holds():
    """A model's part is its value times its trapezoid weight (half at the ends), its share
    that over the unsigned sum of parts; runs below the share, or whose top part is not
    positive, are not listed."""
    records = (
        _curve("bald", 5, [1.0, 1.0, 100.0, 1.0, 1.0], nlpd=27.0)  # 100 of 103
        + _curve("alm", 5, [4.0, 1.0, 1.0, 1.0, 1.0])  # 2 of 5.5: not listed
        + _curve("b-qbc", 1, [-1.0, -1.0, 3.0, -1.0, -1.0])  # 3 of 6: 50 %, listed
        + _curve("qb-mgp", 2, [-5.0, -5.0, -5.0])
    )
    rows = dominant_models(records)
    assert [(d["acquisition"], d["n_labeled"]) for d in rows] == [("bald", 5), ("b-qbc", 5)]
    bald, qbc = rows
    assert bald["share"] == pytest.approx(100 / 103) and bald["area"] == pytest.approx(103)
    assert bald["value"] == 100 and bald["nlpd_mixture"] == 27.0
    assert qbc["share"] == pytest.approx(0.5) and qbc["area"] == pytest.approx(0.0)
    # the code's NLML is half the NLML here: the same shares
    assert dominant_models(records, "nlml_paper")[0]["share"] == pytest.approx(100 / 103)
    assert dominant_models(records, share=0.99) == []
    text = dominant_markdown(records)
    assert "| hartmann6 | bald | 5 | 5 | 100.0 | 27.00 | 103.0 | 97% |" in text
    assert "the code's NLML: 2 run(s)" in text
    assert dominant_markdown(records[:5], share=0.99) == "No model holds 99% of its run's area.\n"
