"""``batch_benchmark``: a parallel campaign's refit measured in processes of their own, every
tree from the same cold model; two runs of the same tree choose the same batch."""

import json
import sys

from fbgp_al.clients.reproduction import batch_benchmark

MCMC = {"chains": 2, "warmup": 20, "samples": 10, "thinning": 1, "draws": 20}


def test_two_trees_side_by_side_from_the_same_cold_model(tmp_path, capsys):
    tmp_path = tmp_path / "models"  # made by the command
    argv = ["--sizes", "24", "--out", "3", "--models", str(tmp_path), "--mcmc", json.dumps(MCMC)]
    assert batch_benchmark.main([*argv, "--python", f"again={sys.executable}"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[0] == batch_benchmark.HEADER.splitlines()[0]
    assert lines[2].startswith("| this tree | 25 | 3 |") and lines[3].startswith("| again | 25 |")
    assert lines[3].endswith("| 3, the same | 0 |")
    cold = tmp_path / "cold-24-seed0.json"
    assert [p.name for p in tmp_path.iterdir()] == [cold.name]
    here = batch_benchmark.one(24, 3, 0, str(cold), MCMC)  # in this process, from that model
    assert here["n"] == 25 and len(here["batch"]) == 3
    assert not set(here["batch"]) & set(here["pending"])
    other = dict(here, batch=here["batch"][::-1])
    assert batch_benchmark.row("x", other, here).endswith("| 3, other | - |")


def test_a_tree_that_fails_says_so_with_its_error(tmp_path):
    """A cold model that cannot be read (a folder): the child's error, in the parent's."""
    import pytest

    with pytest.raises(RuntimeError, match="(?s)failed at n = 24.*IsADirectoryError"):
        batch_benchmark.measure(sys.executable, 24, 3, 0, str(tmp_path))
