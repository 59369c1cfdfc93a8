"""``fbgp-al bench --protocol paper-code`` and its options: parsing, the campaign bodies, the
records' protocol fields, resuming, the continuous initial design and the cells far from the
paper's RD-AUC. One small stack test needs the service side (``input_scaling``, ``bald-code``,
the ``paper-code`` preset, ``nlml_paper``)."""

import json

import numpy as np
import pytest
from scipy.spatial.distance import pdist

from clients.ops.cli import main as cli
from clients.reproduction import bench
from clients.reproduction.bench import parse_args, plan, resume
from clients.reproduction.compare import gaps, side_by_side
from clients.reproduction.compare import main as compare_main
from clients.reproduction.protocol import PROTOCOLS, grid_pool, run_setup
from clients.reproduction.rdauc import far_from_paper, load_paper_table, summarize
from clients.reproduction.report import dominant_markdown, dominant_models, write_report
from clients.reproduction.runs import RunSpec, resumable, setup_for, spec_body
from clients.simulators import get_simulator
from tests.clients.reproduction.made_up import run_records
from worker.spec.defaults import INITIAL_DESIGN_SIZE, MCMC_PRESETS
from worker.spec.design import maximin_lhs

BASE = ["--simulators", "gramacy1d", "--acquisitions", "alm,bald", "--runs", "1"]
SETTINGS = ("allow_repeats", "bald", "mcmc", "input_scaling", "initial_design")


def _settings(args) -> dict:
    return {name: getattr(args, name) for name in SETTINGS}


def test_the_default_protocol_is_todays():
    args = parse_args(BASE)
    assert args.protocol == "paper"
    assert _settings(args) == PROTOCOLS["paper"] == {
        "allow_repeats": False, "bald": "bald", "mcmc": "paper", "input_scaling": "box",
        "initial_design": "pool"}  # fmt: skip
    bald = plan(args)[1]
    assert bald.acquisition == bald.service_acquisition == "bald"
    body = spec_body(bald)
    # today's body: no input_scaling field, the paper's preset, no repeats
    assert "input_scaling" not in body and body["acquisition"] == "bald"
    assert body["mcmc"] == MCMC_PRESETS["paper"] and body["allow_repeats"] is False


def test_paper_code_sets_all_five():
    args = parse_args([*BASE, "--protocol", "paper-code"])
    assert _settings(args) == {
        "allow_repeats": True, "bald": "bald-code", "mcmc": "paper-code",
        "input_scaling": "labels", "initial_design": "continuous"}  # fmt: skip
    alm, bald = plan(args)
    assert (bald.acquisition, bald.service_acquisition) == ("bald", "bald-code")
    assert alm.service_acquisition == "alm"
    body = spec_body(bald)
    assert body["acquisition"] == "bald-code" and body["input_scaling"] == "labels"
    assert body["allow_repeats"] is True and body["mcmc"]["mode_rule"] == "kde-raw"
    assert body["name"] == "bench-gramacy1d-bald-run0"
    assert bald.record_fields() == {
        "mcmc": "paper-code", "allow_repeats": True, "service_acquisition": "bald-code",
        "input_scaling": "labels", "initial_design": "continuous",
        "protocol": "paper-code"}  # fmt: skip


@pytest.mark.parametrize(
    ("option", "setting", "value"),
    [(["--allow-repeats"], "allow_repeats", True), (["--bald", "bald-code"], "bald", "bald-code"),
     (["--mcmc", "fast"], "mcmc", "fast"),
     (["--input-scaling", "labels"], "input_scaling", "labels"),
     (["--initial-design", "continuous"], "initial_design", "continuous")],
)  # fmt: skip
def test_one_option_alone_changes_one_setting(option, setting, value):
    args = parse_args([*BASE, *option])
    assert _settings(args) == {**PROTOCOLS["paper"], setting: value}
    assert plan(args)[0].protocol == "custom"  # no named protocol


def test_options_given_override_the_protocols():
    args = parse_args([*BASE, "--protocol", "paper-code", "--mcmc", "fast",
                       "--no-allow-repeats", "--bald", "bald"])  # fmt: skip
    assert _settings(args) == {**PROTOCOLS["paper-code"], "mcmc": "fast",
                               "allow_repeats": False, "bald": "bald"}  # fmt: skip
    # the five options spelled out are the protocol itself
    spelled = parse_args([*BASE, "--allow-repeats", "--bald", "bald-code", "--mcmc",
                          "paper-code", "--input-scaling", "labels", "--initial-design",
                          "continuous"])  # fmt: skip
    assert plan(spelled)[1].protocol == "paper-code"


def test_an_unknown_preset_is_an_error(monkeypatch):
    monkeypatch.setattr(bench, "MCMC_PRESETS", {k: v for k, v in MCMC_PRESETS.items()
                                                if k != "paper-code"})  # fmt: skip
    with pytest.raises(SystemExit):
        parse_args([*BASE, "--protocol", "paper-code"])


def test_the_continuous_design_is_the_runs_lhs_not_snapped():
    for name in ("gramacy1d", "branin", "hartmann6"):
        sim = get_simulator(name)
        setup = run_setup(name, 2, design="continuous")
        pooled = run_setup(name, 2)
        # seeded: the same every time; the test set and RMSE points are the pool design's
        again = run_setup(name, 2, design="continuous")
        np.testing.assert_array_equal(setup.initial_x, again.initial_x)
        np.testing.assert_array_equal(setup.initial_y, again.initial_y)
        np.testing.assert_array_equal(setup.test_x, pooled.test_x)
        np.testing.assert_array_equal(setup.rmse_x, pooled.rmse_x)
        assert setup.initial_x.shape == (INITIAL_DESIGN_SIZE, sim.dim)
        assert len(setup.initial_index) == 0
        # another repetition, another design
        assert not np.allclose(run_setup(name, 3, design="continuous").initial_x, setup.initial_x)
        # inside the box, off the grid
        unit = sim.to_unit(setup.initial_x)
        assert np.all((unit > 0) & (unit < 1))
        steps = unit * (sim.points_per_dim - 1)
        assert not np.any(np.isclose(steps, np.rint(steps), rtol=0, atol=1e-9))
        # the maximin LHS the pool design snaps: one point per third of every input, and
        # within the grid's spacing of the snapped points
        np.testing.assert_allclose(unit, maximin_lhs(INITIAL_DESIGN_SIZE, sim.dim, setup.seed))
        for j in range(sim.dim):
            assert sorted(np.floor(unit[:, j] * INITIAL_DESIGN_SIZE)) == [0, 1, 2]
        snapped = grid_pool(sim).points(pooled.initial_index)
        assert np.abs(unit - snapped).max() <= 0.5 / (sim.points_per_dim - 1) + 1e-12
        # maximin: at least as spread as any of a few other random Latin hypercubes
        from scipy.stats import qmc

        rng = np.random.default_rng(0)
        others = [pdist(qmc.LatinHypercube(d=sim.dim, rng=rng).random(3)).min() for _ in range(50)]
        assert pdist(unit).min() >= np.median(others)


def test_the_design_is_shared_by_the_acquisitions_of_a_repetition():
    specs = [RunSpec("branin", acq, 1, 3, initial_design="continuous", bald="bald-code")
             for acq in ("alm", "bald", "b-qbc")]  # fmt: skip
    setups = [setup_for(s) for s in specs]
    for s in setups[1:]:
        np.testing.assert_array_equal(s.initial_x, setups[0].initial_x)
        np.testing.assert_array_equal(s.initial_y, setups[0].initial_y)


def _records(spec: RunSpec, labels: int, **fields) -> list[dict]:
    """Made-up records of ``spec``'s run with its protocol fields (overridden by ``fields``)."""
    return run_records(spec, labels, **{**spec.record_fields(), "max_labels": spec.max_labels,
                                        **fields})  # fmt: skip


def _write(path, records):
    path.write_text("".join(json.dumps(r) + "\n" for r in records))


def test_resume_refuses_to_mix_protocols(tmp_path):
    path = tmp_path / "results.jsonl"
    paper = RunSpec("gramacy1d", "bald", 0, 2)
    code = RunSpec("gramacy1d", "bald", 0, 2, "paper-code", allow_repeats=True, bald="bald-code",
                   input_scaling="labels", initial_design="continuous")  # fmt: skip
    _write(path, _records(paper, 5))
    assert resume(path, [paper]) == ([], {})  # complete, same protocol: nothing to do
    with pytest.raises(SystemExit, match="use another --out"):
        resume(path, [code])
    # each setting alone is another protocol
    for change, message in [({"bald": "bald-code"}, "service acquisition"),
                            ({"input_scaling": "labels"}, "--input-scaling"),
                            ({"initial_design": "continuous"}, "--initial-design"),
                            ({"allow_repeats": True}, "without --allow-repeats")]:  # fmt: skip
        other = RunSpec("gramacy1d", "bald", 0, 2, **change)
        with pytest.raises(SystemExit, match=message):
            resume(path, [other])
    # records written before the fields existed read as the paper protocol
    old = [{k: v for k, v in r.items() if k not in (*code.record_fields(), "allow_repeats")}
           | {"mcmc": "paper"} for r in _records(paper, 5)]  # fmt: skip
    _write(path, old)
    assert resume(path, [paper]) == ([], {})
    with pytest.raises(SystemExit, match="service acquisition"):
        resume(path, [RunSpec("gramacy1d", "bald", 0, 2, bald="bald-code")])
    # an interrupted run goes on only from the records of its own protocol
    mine = _records(code, 4)
    assert resumable(code, mine) == mine
    assert resumable(code, _records(code, 4, input_scaling="box")) == []
    assert resumable(code, _records(paper, 4)) == []  # another design, other settings
    # the pool design's first record does not fit a continuous run even with its settings
    assert resumable(code, [{**r, **code.record_fields()} for r in _records(paper, 4)]) == []


def _synthetic(path):
    """Two identical runs of gramacy1d for alm, b-qbc and qb-mgp, flat curves over 3..5
    labels. RD-AUC (%): rmse b-qbc 50 (paper 20.8 ± 0.9: far), qb-mgp 20 (19.6 ± 0.8: near);
    nlml b-qbc 100 (36.3 ± 1.0: far), qb-mgp 20.6 (20.6 ± 0.9); nlml_paper qb-mgp 100
    (the paper's NLML 20.6 ± 0.9: far), b-qbc 36.3."""
    values = {"alm": (1.0, 1.0, 1.0), "b-qbc": (0.5, 1 - 0.363, 0.5),
              "qb-mgp": (1 - 0.103, 0.0, 0.8)}  # fmt: skip
    records = []
    for acq, (nlml, nlml_paper, rmse) in values.items():
        for run in (0, 1):
            for n in (3, 4, 5):
                records.append({"simulator": "gramacy1d", "acquisition": acq, "run": run,
                                "n_labeled": n, "nlml": nlml, "nlml_paper": nlml_paper,
                                "rmse": rmse, "max_labels": 5, "refit_seconds": 1.0,
                                "max_rhat": 1.0, "min_ess": 100.0,
                                "divergences": 0})  # fmt: skip
    _write(path, records)
    return records


def test_the_cells_far_from_the_paper(tmp_path):
    records = _synthetic(tmp_path / "results.jsonl")
    summary = summarize(records)
    assert summary["nlml_paper"]["qb-mgp"]["gramacy1d"]["mean"] == pytest.approx(100)
    far = far_from_paper(summary, load_paper_table())
    assert [(c["metric"], c["acquisition"], c["simulator"]) for c in far] == [
        ("nlml", "b-qbc", "gramacy1d"), ("rmse", "b-qbc", "gramacy1d"),
        ("nlml_paper", "qb-mgp", "gramacy1d")]  # fmt: skip
    nlml, rmse, paper = far
    assert nlml["ours"] == pytest.approx(100) and nlml["paper"] == 36.3
    assert nlml["gap"] == pytest.approx((100 - 36.3) / 1.0)
    assert rmse["ours"] == pytest.approx(50) and rmse["gap"] == pytest.approx((50 - 20.8) / 0.9)
    assert paper["paper"] == 20.6 and paper["gap"] == pytest.approx((100 - 20.6) / 0.9)
    assert rmse["runs"] == 2 and rmse["sd"] == pytest.approx(0)
    # our spread is 0 here: the joint gap is the gap in paper-sds
    assert rmse["joint_gap"] == pytest.approx(rmse["gap"])
    one_run = summarize([r for r in records if r["run"] == 0])
    assert all(np.isnan(c["joint_gap"]) for c in far_from_paper(one_run, load_paper_table()))

    # in the report: the nlml_paper table, the section, and the cells in rdauc.json
    write_report(tmp_path / "results.jsonl", tmp_path)
    md = (tmp_path / "rdauc.md").read_text()
    assert "### NLML as the paper's code computes it" in md
    row = "| nlml_paper | qb-mgp | gramacy1d | 100.0 ± 0.0 (2 runs) | 20.6 ± 0.9 | +88.2 | +88.2 |"
    assert row in md
    summary_md = (tmp_path / "summary.md").read_text()
    assert "## Cells more than 2 paper-sds from the paper" in summary_md
    row = "| rmse | b-qbc | gramacy1d | 50.0 ± 0.0 (2 runs) | 20.8 ± 0.9 | +32.4 | +32.4 |"
    assert row in summary_md
    table = json.loads((tmp_path / "rdauc.json").read_text())
    assert len(table["far_from_paper"]) == 3
    assert table["metrics"]["nlml_paper"]["qb-mgp"]["gramacy1d"]["paper"]["mean"] == 20.6


def test_no_nlml_paper_table_without_it(tmp_path):
    records = [{k: v for k, v in r.items() if k != "nlml_paper"}
               for r in _synthetic(tmp_path / "results.jsonl")]  # fmt: skip
    assert set(summarize(records)) == {"nlml", "rmse"}


def test_paper_code_end_to_end(api_url, tmp_path):
    """Needs the service side: input_scaling, bald-code and nlml_paper. A tiny preset."""
    cli(["bench", "--url", api_url, "--out", str(tmp_path), *BASE, "--protocol", "paper-code",
         "--mcmc", "fast", "--iterations", "2", "--no-progress"])  # fmt: skip
    lines = [json.loads(x) for x in (tmp_path / "results.jsonl").read_text().splitlines()]
    assert len(lines) == 2 * 3
    setup = run_setup("gramacy1d", 0, design="continuous")
    for r in lines:
        assert r["allow_repeats"] is True and r["input_scaling"] == "labels"
        assert r["initial_design"] == "continuous" and r["mcmc"] == "fast"
        assert r["service_acquisition"] == {"alm": "alm", "bald": "bald-code"}[r["acquisition"]]
        assert np.isfinite(r["nlml_paper"]) and r["nlml_paper"] != r["nlml"]
        if r["n_labeled"] == 3:
            np.testing.assert_array_equal(r["x"], setup.initial_x)
    assert "### NLML as the paper's code computes it" in (tmp_path / "rdauc.md").read_text()


def test_a_continuous_design_alone_runs_on_todays_service(api_url, tmp_path):
    """The off-grid initial design is imported into a grid-pool campaign and the run goes on."""
    cli(["bench", "--url", api_url, "--out", str(tmp_path), "--simulators", "gramacy1d",
         "--acquisitions", "alm", "--runs", "1", "--initial-design", "continuous", "--mcmc",
         "fast", "--iterations", "1", "--no-progress"])  # fmt: skip
    lines = [json.loads(x) for x in (tmp_path / "results.jsonl").read_text().splitlines()]
    assert [r["n_labeled"] for r in lines] == [3, 4]
    setup = run_setup("gramacy1d", 0, design="continuous")
    np.testing.assert_array_equal(lines[0]["x"], setup.initial_x)
    assert {r["initial_design"] for r in lines} == {"continuous"}
    assert {r["protocol"] for r in lines} == {"custom"}


def test_two_protocols_side_by_side(tmp_path, capsys):
    """The paper's cell, each protocol's (mean ± sd (runs)), and the code's NLML of the second."""
    base_dir, other_dir = tmp_path / "base", tmp_path / "other"
    for d in (base_dir, other_dir):
        d.mkdir()
    records = _synthetic(other_dir / "results.jsonl")
    _write(base_dir / "results.jsonl", [{k: v for k, v in r.items() if k != "nlml_paper"}
                                        for r in records if r["run"] == 0])  # fmt: skip
    write_report(base_dir / "results.jsonl", base_dir)
    write_report(other_dir / "results.jsonl", other_dir)
    base, other = (json.loads((d / "rdauc.json").read_text()) for d in (base_dir, other_dir))
    text = side_by_side(base, other, ("today", "paper-code"))
    lines = text.splitlines()
    at = lines.index(next(line for line in lines if line.startswith("| b-qbc | paper |")))
    assert lines[at].split(" | ")[2] == "36.3 ± 1.0"
    assert lines[at + 1].split(" | ")[1:3] == ["today", "100.0 (1)"]
    assert lines[at + 2].split(" | ")[1:3] == ["paper-code", "100.0 ± 0.0 (2)"]
    assert lines[at + 3].split(" | ")[1:3] == ["paper-code, the code's NLML", "36.3 ± 0.0 (2)"]
    assert "#### RMSE" in text and "| alm |" not in text
    # the command prints the same, and refuses a file that is not there
    paths = [str(d / "rdauc.json") for d in (base_dir, other_dir)]
    compare_main([*paths, "--names", "today,paper-code"])
    assert capsys.readouterr().out.startswith(text)
    with pytest.raises(SystemExit) as exit_:
        compare_main([paths[0], str(tmp_path / "missing.json")])
    assert exit_.value.code == 2 and "no file" in capsys.readouterr().err


def _table(cells: dict, code: dict | None = None) -> dict:
    """An ``rdauc.json``-shaped dict: ``cells[(metric, acq, sim)] = (mean, sd, runs)`` against
    the paper's Table 2; ``code``, the same for ``nlml_paper``."""
    paper = load_paper_table()
    metrics: dict = {}
    for name, source in (("nlml", cells), ("rmse", cells), ("nlml_paper", code or {})):
        if name == "nlml_paper" and not code:
            continue
        per_acq = metrics.setdefault(name, {"alm": {}})
        for (metric, acq, sim), (mean, sd, runs) in source.items():
            if metric != name.split("_")[0]:
                continue
            theirs = paper[metric][acq][sim]
            per_acq.setdefault(acq, {})[sim] = {"ours": {"mean": mean, "sd": sd, "runs": runs},
                                                "paper": theirs}  # fmt: skip
    return {"baseline": "alm", "columns": ["gramacy1d", "branin"], "metrics": metrics}


def test_gaps_count_the_cells_both_protocols_ran():
    """Mean absolute gap over the shared cells, cells beyond 2 paper ±, and beyond 2 of
    sqrt(pm^2 + sd^2); a cell only one protocol has is left out of every row."""
    paper = load_paper_table()
    g_pm = paper["nlml"]["b-qbc"]["gramacy1d"]  # 36.3 ± 1.0
    b_pm = paper["nlml"]["b-qbc"]["branin"]  # 33.1 ± 1.2
    r_pm = paper["rmse"]["b-qbc"]["gramacy1d"]  # 20.8 ± 0.9
    base = _table({("nlml", "b-qbc", "gramacy1d"): (g_pm["mean"] + 10, 1.0, 3),
                   ("nlml", "b-qbc", "branin"): (b_pm["mean"] - 1, 1.0, 3),
                   ("rmse", "b-qbc", "gramacy1d"): (r_pm["mean"], 0.5, 3)})  # fmt: skip
    other = _table({("nlml", "b-qbc", "gramacy1d"): (g_pm["mean"] - 4, 3.0, 5),
                    ("nlml", "b-qbc", "branin"): (b_pm["mean"] + 3, 0.1, 5),
                    ("nlml", "bald", "gramacy1d"): (0.0, 1.0, 5),  # base has no such cell
                    ("rmse", "b-qbc", "gramacy1d"): (r_pm["mean"] + 2, 0.1, 5)},
                   code={("nlml", "b-qbc", "gramacy1d"): (g_pm["mean"], 1.0, 5),
                         ("nlml", "b-qbc", "branin"): (b_pm["mean"] + 6, 1.0, 5)})  # fmt: skip
    rows = {
        tuple(line.split(" | ")[:2]): line.split(" | ")[2:]
        for line in gaps(base, other, ("today", "code")).splitlines()
        if " | NLML | " in line or " | RMSE | " in line
    }
    # |+10|, |-1|: 10 > 2, 10 > 2.8; sd / pm: 1 / 1, 1 / 1.2
    assert rows[("| today", "NLML")] == ["5.5", "5.5", "1", "1", "0.92 |"]
    # 4 > 2 but < 2 * 3.2; 3 > 2.4; sd / pm: 3 / 1, 0.1 / 1.2
    assert rows[("| code", "NLML")] == ["3.5", "3.5", "2", "1", "1.54 |"]
    assert rows[("| code, the code's NLML", "NLML")] == ["3.0", "3.0", "1", "1", "0.92 |"]
    assert rows[("| today", "RMSE")] == ["0.0", "0.0", "0", "0", "0.56 |"]
    assert rows[("| code", "RMSE")][:3] == ["2.0", "2.0", "1"]  # 2 > 1.8, and > 2 * hypot(0.9, 0.1)
    assert "Over 2 cells (1 acquisitions x 2 simulators)" in gaps(base, other)


def _curve(acq: str, run: int, nlml: list[float], nlpd: float = 2.0) -> list[dict]:
    return [{"simulator": "hartmann6", "acquisition": acq, "run": run, "n_labeled": 3 + i,
             "nlml": v, "nlml_paper": v / 2, "nlpd_mixture": nlpd}
            for i, v in enumerate(nlml)]  # fmt: skip


def test_runs_whose_area_one_model_holds():
    """A model's part is its value times its trapezoid weight (half at the ends), its share
    that over the unsigned sum of parts; runs below the share, or whose top part is not
    positive, are not listed."""
    records = (_curve("bald", 5, [1.0, 1.0, 100.0, 1.0, 1.0], nlpd=27.0)  # 100 of 103
               + _curve("alm", 5, [4.0, 1.0, 1.0, 1.0, 1.0])  # 2 of 5.5: not listed
               + _curve("b-qbc", 1, [-1.0, -1.0, 3.0, -1.0, -1.0])  # 3 of 6: 50 %, listed
               + _curve("qb-mgp", 2, [-5.0, -5.0, -5.0]))  # fmt: skip
    rows = dominant_models(records)
    assert [(d["acquisition"], d["n_labeled"]) for d in rows] == [("bald", 5), ("b-qbc", 5)]
    bald, qbc = rows
    assert bald["share"] == pytest.approx(100 / 103) and bald["area"] == pytest.approx(103)
    assert bald["value"] == 100 and bald["nlpd_mixture"] == 27.0
    assert qbc["share"] == pytest.approx(0.5) and qbc["area"] == pytest.approx(0.0)
    # the code's NLML is half the NLML here: the same shares
    assert dominant_models(records, "nlml_paper")[0]["share"] == pytest.approx(100 / 103)
    assert dominant_models(records, share=0.99) == []
    text = dominant_markdown(records)
    assert "| hartmann6 | bald | 5 | 5 | 100.0 | 27.00 | 103.0 | 97% |" in text
    assert "the code's NLML: 2 run(s)" in text
    assert dominant_markdown(records[:5], share=0.99) == "No model holds 99% of its run's area.\n"
