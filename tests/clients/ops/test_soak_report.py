"""What ``fbgp-al soak`` reports (:mod:`clients.ops.soak_report`): the summary lists each fault
and campaign as the report holds them, and a run fails on a lost label, a lost ``y``, a stuck
campaign or a fault not recovered, and on nothing else."""

import pytest

from fbgp_al.clients.ops.soak_report import failed, summary


def _report(**changes) -> dict:
    report = {
        "seconds": 60.0,
        "campaigns": 1,
        "simulators": 2,
        "workers": 2,
        "labels_acknowledged": 12,
        "labels_stored": 13,
        "lost": 0,
        "lost_y": 0,
        "extra": 1,
        "unrecovered": 0,
        "stuck": 0,
        "faults": [
            {"at": 12.5, "kind": "redis", "recovery_seconds": 3.25},
            {"at": 40.0, "kind": "horse", "recovery_seconds": None},
        ],
        "campaign_details": [
            {
                "id": "abc",
                "mode": "parallel",
                "n_labeled": 12,
                "max_labels": 20,
                "model_version": 11,
                "state": "running",
                "stuck": False,
                "progressing": True,
            }
        ],
    }
    return {**report, **changes}


def test_the_summary_says_what_the_report_holds():
    lines = summary(_report()).splitlines()
    assert lines[0] == "soak: 60 s, 1 campaigns, 2 simulators, 2 workers"
    assert "12 acknowledged, 13 stored, 0 lost, 1 extra" in lines[1]
    assert lines[3].split() == ["12.5", "s", "redis", "recovered", "in", "3.2", "s"]
    assert lines[4].split()[-2:] == ["not", "recovered"]
    assert "12/20 labels, model 11, running, progressing" in lines[5]
    assert lines[-1] == "stuck campaigns: 0"


@pytest.mark.parametrize(
    ("changes", "fails"),
    [
        ({}, False),
        ({"extra": 5}, False),  # stored but never acknowledged: allowed
        ({"lost": 1}, True),
        ({"lost_y": 1}, True),
        ({"stuck": 1}, True),
        ({"unrecovered": 1}, True),
    ],
)
def test_a_run_fails_on_what_a_user_would_lose(changes, fails):
    assert failed(_report(**changes)) is fails
