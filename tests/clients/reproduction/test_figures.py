"""The figures behind the reproduction's notes, on made-up records."""

import json

from fbgp_al.clients.reproduction.figures import (
    face_share,
    main,
    mode_share,
    repeat_share,
    rhat_share,
)


def _record(sim="gramacy2d", acq="alm", run=0, n=3, **fields) -> dict:
    return {
        "simulator": sim,
        "acquisition": acq,
        "run": run,
        "n_labeled": n,
        "nlml": 1.0,
        "rmse": 1.0,
        **fields,
    }


def test_face_share_counts_the_chosen_points_near_a_face_of_the_box():
    # gramacy2d's box is [-2, 6]^2: 2 % of its range is 0.16
    initial = [[-2.0, -2.0], [6.0, 0.0], [1.0, 1.0]]  # two on faces, but not chosen
    records = [
        _record(n=3, x=initial),
        _record(n=4, x=[[-1.85, 3.0]]),  # 0.15 from the face x1 = -2
        _record(n=5, x=[[2.0, 5.83]]),  # 0.17 from the face x2 = 6: not near
        _record(n=6, x=[[2.0, 2.0]]),
        _record(acq="b-qbc", n=3, x=initial),
        _record(acq="b-qbc", n=4, x=[[6.0, 6.0]]),
        _record(acq="b-qbc", run=1, n=3, x=initial),
        _record(acq="b-qbc", run=1, n=4, x=[[0.0, 0.0]]),
    ]
    assert face_share(records, face=0.02) == {
        ("gramacy2d", "alm"): (1, 3),
        ("gramacy2d", "b-qbc"): (1, 2),
    }
    assert face_share(records, face=0.03)[("gramacy2d", "alm")] == (2, 3)


def test_repeat_share_counts_the_chosen_points_labeled_before_in_their_run():
    initial = [[0.5], [1.5], [2.5]]
    records = [
        _record(sim="gramacy1d", n=3, x=initial),
        _record(sim="gramacy1d", n=4, x=[[2.5]]),  # the initial design's
        _record(sim="gramacy1d", n=5, x=[[1.0]]),
        _record(sim="gramacy1d", n=6, x=[[1.0]]),  # an earlier choice
        _record(sim="gramacy1d", n=7, x=[[1.02]]),
        _record(sim="gramacy1d", run=1, n=3, x=initial),
        _record(sim="gramacy1d", run=1, n=4, x=[[1.0]]),  # another run's point: not a repeat
        _record(sim="gramacy1d", acq="b-qbc", n=3, x=initial),
        _record(sim="gramacy1d", acq="b-qbc", n=4, x=[[0.7]]),
    ]
    assert repeat_share(records) == {("gramacy1d", "alm"): (2, 5), ("gramacy1d", "b-qbc"): (0, 1)}


def test_mode_and_rhat_shares_count_the_models_past_their_threshold():
    records = [
        _record(sim="gramacy1d", n=29, rmse=0.5, max_rhat=1.5),
        _record(sim="gramacy1d", n=30, rmse=0.25, max_rhat=1.05),
        _record(sim="gramacy1d", n=31, rmse=0.06, max_rhat=None),
        _record(sim="gramacy1d", acq="qb-mgp", n=40, rmse=0.2, max_rhat=1.2),
        _record(sim="branin", n=40, rmse=9.0, max_rhat=1.0),
    ]
    shares = mode_share(records, "gramacy1d", after=30, rmse_above=0.2)
    assert shares == {"alm": (1, 2), "qb-mgp": (0, 1)}
    assert rhat_share(records, rhat_above=1.1) == {"gramacy1d": (2, 3), "branin": (0, 1)}


def test_main_prints_the_tables_of_the_finished_runs(tmp_path, capsys):
    path = tmp_path / "results.jsonl"
    records = [
        _record(n=3, x=[[0.0, 0.0]], max_rhat=1.3),
        _record(n=4, x=[[6.0, 1.0]], max_rhat=1.0),
        _record(acq="qb-mgp", n=3, x=[[0.0, 0.0]]),  # qb-mgp stopped early
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    main([str(path)])
    out = capsys.readouterr().out
    assert "| gramacy2d | 100 % of 1 |" in out
    repeats = out.split("had been labeled before in their run:")[1]
    assert repeats.split("\n\n")[1].splitlines()[2] == "| gramacy2d | 0 % of 1 |"
    assert "qb-mgp" not in out  # an unfinished run is left out, as in the tables
    assert "| share | 50 % of 2 |" in out  # R-hat: one of alm's two models is above 1.1
    assert "no models of gramacy1d on 30+ labels" in out
