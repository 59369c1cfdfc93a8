"""One benchmark run (:mod:`clients.reproduction.runs`): an interrupted run goes on from the
records that fit it, and a repetition's acquisitions share its design."""

import dataclasses

import numpy as np

from fbgp_al.clients.reproduction.runs import (
    RunSpec,
    resumable,
    setup_for,
)
from tests.clients.reproduction.made_up import run_records


def _records(spec: RunSpec, labels: int) -> list[dict]:
    """Records as the bench wrote them before they carried the protocol's other fields."""
    return run_records(spec, labels, mcmc=spec.mcmc)


def test_an_interrupted_run_goes_on_from_the_records_that_fit_it():
    spec = RunSpec("gramacy1d", "alm", 0, iterations=5, mcmc="fast")
    records = _records(spec, 8)
    assert resumable(spec, records) == records
    other_run = _records(RunSpec("gramacy1d", "alm", 1, 5, "fast"), 8)
    assert resumable(spec, other_run + records[:2]) == records[:2]
    # up to the first record that is missing or does not fit
    assert resumable(spec, records[:2] + records[3:]) == records[:2]
    tampered = [*records[:4], dict(records[4], y=[records[4]["y"][0] + 1e-3]), records[5]]
    assert resumable(spec, tampered) == records[:4]
    # labels drawn in another order are not the run's
    swapped = [
        *records[:3],
        dict(records[3], y=records[4]["y"]),
        dict(records[4], y=records[3]["y"]),
    ]
    assert resumable(spec, swapped) == records[:3]
    assert resumable(spec, [dict(records[0], mcmc="paper"), *records[1:]]) == []
    assert resumable(spec, [dict(records[0], y=[0.0, 0.0, 0.0]), *records[1:]]) == []
    assert resumable(spec, [*records[:2], dict(records[2], x=[[0.5, 0.5]])]) == records[:2]
    assert resumable(spec, [*records[:2], dict(records[2], x=[[2.0]])]) == records[:2]  # outside
    # a run that may label pool points again is another protocol
    repeats = dataclasses.replace(spec, allow_repeats=True)
    assert resumable(repeats, records) == []
    marked = [dict(r, allow_repeats=True) for r in records]
    assert resumable(repeats, marked) == marked and resumable(spec, marked) == []


def test_the_design_is_shared_by_the_acquisitions_of_a_repetition():
    specs = [
        RunSpec("branin", acq, 1, 3, initial_design="continuous", bald="bald-code")
        for acq in ("alm", "bald", "b-qbc")
    ]
    setups = [setup_for(s) for s in specs]
    for s in setups[1:]:
        np.testing.assert_array_equal(s.initial_x, setups[0].initial_x)
        np.testing.assert_array_equal(s.initial_y, setups[0].initial_y)
