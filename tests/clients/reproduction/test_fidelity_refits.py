"""``fbgp-al bench-fidelity --refits`` (:mod:`clients.reproduction.fidelity_refits`) at a tiny
size: each arm's refits by the method it names, the labels a fifth expensive, the table's rows."""

import numpy as np

from fbgp_al.clients.reproduction import fidelity_refits
from fbgp_al.clients.reproduction.fidelity_problems import PROBLEMS

TINY = {"chains": 2, "warmup": 30, "samples": 20, "thinning": 2, "draws": None}


def test_the_labels_are_a_fifth_expensive_and_noisy():
    labels = fidelity_refits.labels_of(PROBLEMS["currin"], 20, 0)
    levels = [label["x"][-1] for label in labels]
    assert levels.count("expensive") == 4 and levels[0] == "expensive"
    u = np.array([label["x"][:2] for label in labels])  # currin's box is the unit square
    exact = PROBLEMS["currin"].at(u[:1], 1)[0]
    assert 0 < abs(labels[0]["y"] - exact) < 0.1 * abs(exact)


def test_both_arms_refit_by_their_method_and_the_table_has_a_row_each():
    rows = fidelity_refits.refits(PROBLEMS["forrester"], 24, 0, TINY)
    assert [(r["arm"], r["refit"], r["n"]) for r in rows] == [
        ("nuts", "cold", 24),
        ("nuts", "warm", 25),
        ("laplace", "cold", 24),
        ("laplace", "warm", 25),
        ("laplace", "from NUTS", 25),
    ]
    assert [r["method"] for r in rows[:2]] == ["nuts", "nuts"]
    assert all(r["khat"] is not None for r in rows[2:])  # the mixture tried, used or not
    assert all(r["mean_shift_sd"] is None for r in rows[:2])
    assert all(r["mean_shift_sd"] >= 0 and r["rmse"] > 0 for r in rows[2:])
    lines = fidelity_refits.table(rows).splitlines()
    assert len(lines) == 2 + len(rows) and "| forrester | 0 | 25 | laplace | warm |" in lines[5]
