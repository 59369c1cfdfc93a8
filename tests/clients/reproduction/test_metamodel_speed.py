"""The offline Metamodel's benchmark (:mod:`clients.reproduction.metamodel_speed`), at a small
size: it times the predictions before and after side by side and reports how far apart they
are, which is within 1e-10. (The predictions' agreement on its own, chunked or not:
tests/clients/test_metamodel.py.)"""

import re

from fbgp_al.clients.reproduction import metamodel_speed


def test_the_benchmark_times_both_and_finds_the_same_predictions(capsys):
    metamodel_speed.main(["--points", "50", "--draws", "12", "--labels", "15", "--repeats", "1"])
    out = capsys.readouterr().out
    assert out.startswith("50 points, 2 outputs on the log scale, 12 draws, 15 labels")
    before = float(re.search(r"^before\s+([\d.]+)$", out, re.M).group(1))
    after = float(re.search(r"^after\s+([\d.]+)$", out, re.M).group(1))
    assert before > 0 and after > 0
    differs = float(re.search(r"largest difference .*: ([\d.e+-]+)", out).group(1))
    assert differs < 1e-10
