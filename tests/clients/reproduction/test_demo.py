"""``fbgp-al demo`` (:mod:`clients.reproduction.demo`): the loop in process, and the run drawn."""

from fbgp_al.clients.ops.cli import main


def test_demo_runs_the_loop_and_draws_the_run(tmp_path, capsys):
    out = tmp_path / "demo.png"
    args = ["--iterations", "2", "--chains", "2", "--warmup", "20", "--samples", "10"]
    main(["demo", *args, "--thinning", "2", "--out", str(out)])
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("n=")]
    assert len(lines) == 3  # the initial design, then one line per new label
    assert "rmse" in lines[-1] and out.stat().st_size > 1000
