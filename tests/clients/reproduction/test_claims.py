"""The paper's claims (:mod:`clients.reproduction.claims`), checked on made-up summaries, also
with the paper's code's NLML."""

from fbgp_al.clients.reproduction.claims import check_claims


def _summary(nlml: dict, rmse: dict, motorcycle=None) -> dict:
    def cells(overall: dict, metric: str) -> dict:
        out = {}
        for acq, value in overall.items():
            out[acq] = {
                "branin": {"mean": value, "sd": 1.0, "runs": 3},
                "overall_mean": {"mean": value, "sd": 0.0},
            }
            if motorcycle is not None:
                out[acq]["motorcycle"] = {"mean": motorcycle[metric][acq], "sd": 1.0, "runs": 3}
        return out

    return {"nlml": cells(nlml, "nlml"), "rmse": cells(rmse, "rmse")}


def test_claims_are_checked_against_the_summary():
    acqs = ("alm", "b-alm", "bald", "b-qbc", "qb-mgp")
    nlml = dict(zip(acqs, (0.0, 16.0, -8.0, 41.0, 29.0), strict=True))
    rmse = dict(zip(acqs, (0.0, 5.0, 3.0, 9.0, 12.0), strict=True))
    moto = {
        "nlml": dict(zip(acqs, (0.0, 1.0, 2.0, -20.0, 10.0), strict=True)),
        "rmse": dict(zip(acqs, (0.0, 1.0, 2.0, 30.0, 10.0), strict=True)),
    }
    verdicts = [c.verdict for c in check_claims(_summary(nlml, rmse, moto))]
    assert verdicts == ["held", "held", "mixed", "mixed"]
    nlml["qb-mgp"] = 50.0
    moto["rmse"]["qb-mgp"] = 40.0
    rmse["bald"] = -3.0
    verdicts = [c.verdict for c in check_claims(_summary(nlml, rmse, moto))]
    assert verdicts == ["not held", "held", "held", "held"]
    # ALM against itself averages to a rounding residue, which reads 0.0, not -0.0
    nlml["alm"] = -1e-17
    assert "alm 0.0 %" in check_claims(_summary(nlml, rmse, moto))[0].evidence
    only = {"alm": 0.0, "qb-mgp": 3.0}
    verdicts = [c.verdict for c in check_claims(_summary(only, only))]
    assert verdicts == ["not tested", "held", "not tested", "not tested"]


def test_the_nlml_claims_are_checked_again_with_the_paper_codes_nlml():
    acqs = ("alm", "b-alm", "bald", "b-qbc", "qb-mgp")
    nlml = dict(zip(acqs, (0.0, 16.0, 30.0, 41.0, 29.0), strict=True))
    paper = dict(zip(acqs, (0.0, 16.0, -8.0, 12.0, 29.0), strict=True))
    rmse = dict(zip(acqs, (0.0, 5.0, -3.0, 9.0, 12.0), strict=True))
    moto = {
        "nlml": dict(zip(acqs, (0.0, 1.0, 2.0, 20.0, 10.0), strict=True)),
        "nlml_paper": dict(zip(acqs, (0.0, 1.0, 2.0, -20.0, 10.0), strict=True)),
        "rmse": dict(zip(acqs, (0.0, 1.0, 2.0, 30.0, 40.0), strict=True)),
    }
    summary = _summary(nlml, rmse, moto)
    assert len(check_claims(summary)) == 4  # no nlml_paper: the four claims alone
    summary["nlml_paper"] = _summary(paper, paper, {**moto, "nlml": moto["nlml_paper"]})["nlml"]
    claims = check_claims(summary)
    assert [c.verdict for c in claims] == [
        "held",
        "held",
        "mixed",
        "mixed",
        "not held",
        "held",
        "held",
    ]
    assert all("paper's code" in c.text for c in claims[4:])
    assert "NLML (paper's code)" in claims[4].evidence
