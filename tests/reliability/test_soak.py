"""A bounded soak test: simulators label two campaigns over HTTP while a worker is killed and
started again, a work horse is killed, Redis is killed and started again, and the API is killed
and started again. Every acknowledged label is stored and every campaign recovers."""

from clients.ops.soak import FAULT_KINDS, run_soak


def test_soak_loses_no_acknowledged_label_and_every_campaign_recovers(tmp_path):
    lines = []
    report = run_soak(seconds=60, campaigns=2, simulators_per_campaign=2, workers=2,
                      data_dir=tmp_path, seed=0, progress=lines.append)  # fmt: skip
    figures = "\n".join(lines)
    assert report["lost"] == 0 and report["lost_y"] == 0, report
    assert report["stuck"] == 0, report
    assert report["extra"] == 0, report  # every lost answer was asked again
    assert report["labels_acknowledged"] == report["labels_stored"] > 0, report
    faults = report["faults"]
    assert [f["kind"] for f in faults] == list(FAULT_KINDS), figures
    assert len(faults) >= 4
    for fault in faults:
        assert fault["recovery_seconds"] is not None, (fault, figures)
        assert fault["recovery_seconds"] < 120, (fault, figures)
    for campaign in report["campaign_details"]:
        assert campaign["state"] == "done" or campaign["progressing"], campaign
        assert campaign["stored"] == campaign["n_labeled"] == campaign["observations"], campaign
