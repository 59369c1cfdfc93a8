"""``picture_benchmark``: the page's costliest numbers measured in processes of their own, every
tree from the same cold model; two runs of the same tree give the same curves and indices."""

import sys

import pytest

from fbgp_al.clients.reproduction import picture_benchmark


def test_two_trees_side_by_side_from_the_same_cold_model(tmp_path, capsys):
    argv = ["--sizes", "12", "--models", str(tmp_path), "--python", f"again={sys.executable}"]
    assert picture_benchmark.main(argv) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[0] == picture_benchmark.HEADER.splitlines()[0]
    assert lines[2].startswith("| this tree | 12 |") and lines[3].startswith("| again | 12 |")
    assert lines[3].endswith("| 0 | 0 |")
    cold = tmp_path / "cold-12-seed0.json"
    here = picture_benchmark.one(12, 0, str(cold))  # in this process, from that model
    assert len(here["effects"]) == 6 and len(here["pair"]) == 40 * 40
    assert len(here["sobol"]) == 6 and all(0 <= s <= 1 for s in here["sobol"])
    moved = dict(here, sobol=[s + 0.5 for s in here["sobol"]])
    assert picture_benchmark.row("x", moved, here).endswith("| 0 | 0.5 |")


def test_a_tree_that_fails_says_so_with_its_error(tmp_path):
    """A cold model that cannot be read (a folder): the child's error, in the parent's."""
    from fbgp_al.clients.reproduction.batch_benchmark import run_file

    args = ["--one", "12", "--seed", "0", "--cold", str(tmp_path)]
    with pytest.raises(RuntimeError, match="(?s)failed at n = 12.*IsADirectoryError"):
        run_file(sys.executable, picture_benchmark.__file__, args, "n = 12")
