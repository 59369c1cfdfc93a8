"""``fbgp-al bench`` (:mod:`clients.reproduction.bench`): end to end against a real API, Redis and
worker, with a tiny setting (today's protocol, ``--allow-repeats``, ``--protocol paper-code`` and
a continuous initial design alone); its options (the protocol and each setting, parsed); and
resuming, which refuses to mix protocols."""

import json
import time

import numpy as np
import pytest

from fbgp_al.clients.ops.cli import main as cli
from fbgp_al.clients.reproduction import bench
from fbgp_al.clients.reproduction.bench import parse_args, plan, resume
from fbgp_al.clients.reproduction.protocol import PROTOCOLS, run_setup
from fbgp_al.clients.reproduction.results import read_results
from fbgp_al.clients.reproduction.runs import RunSpec, label_rng, paper_body, resumable, spec_body
from fbgp_al.clients.simulators import get_simulator
from fbgp_al.worker.vocabulary.defaults import MCMC_PRESETS
from tests.clients.reproduction.made_up import run_records

ARGS = [
    "--simulators",
    "gramacy1d",
    "--acquisitions",
    "alm,qb-mgp",
    "--runs",
    "1",
    "--iterations",
    "3",
    "--mcmc",
    "fast",
    "--no-progress",
]


def _lines(path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_bench_runs_resumes_and_reports(api_url, tmp_path, capsys):
    results = tmp_path / "results.jsonl"
    cli(["bench", "--url", api_url, "--out", str(tmp_path), "--parallel", "2", *ARGS])
    lines = _lines(results)
    assert len(lines) == 2 * 4  # 2 acquisitions x the models at 3, 4, 5 and 6 labels
    setup = run_setup("gramacy1d", 0)
    for acq in ("alm", "qb-mgp"):
        run = sorted((r for r in lines if r["acquisition"] == acq), key=lambda r: r["n_labeled"])
        assert [r["n_labeled"] for r in run] == [3, 4, 5, 6]
        assert [r["model_version"] for r in run] == [3, 4, 5, 6]
        assert {r["max_labels"] for r in run} == {6}  # how the report knows the run finished
        # every acquisition starts from the run's own initial design and labels
        np.testing.assert_array_equal(run[0]["x"], setup.initial_x)
        np.testing.assert_array_equal(run[0]["y"], setup.initial_y)
        assert all(len(r["x"]) == 1 for r in run[1:])
        for r in run:
            assert np.isfinite(r["nlml"]) and r["rmse"] > 0 and r["refit_seconds"] > 0
            assert r["max_rhat"] > 0 and r["min_ess"] > 0 and r["divergences"] >= 0
            assert r["mcmc"] == "fast" and r["seed"] == setup.seed and r["workers"] == 1
            assert r["seconds"] > 0 and abs(r["finished_at"] - time.time()) < 600
    for name in ("rdauc.md", "rdauc.json", "learning_curves.png", "summary.md"):
        assert (tmp_path / name).stat().st_size > 100, name
    table = json.loads((tmp_path / "rdauc.json").read_text())
    cell = table["metrics"]["nlml"]["qb-mgp"]["gramacy1d"]
    assert cell["ours"]["runs"] == 1 and cell["paper"]["mean"] == 20.6
    summary = (tmp_path / "summary.md").read_text()
    assert "--mcmc fast" in summary and "not tested" in summary
    assert "h of campaign time" in summary and "h on 1 worker(s), from the 8 records" in summary
    assert "The paper's claims" in capsys.readouterr().out

    # a second invocation finds both runs complete: nothing is redone
    started = time.perf_counter()
    cli(["bench", "--url", api_url, "--out", str(tmp_path), *ARGS])
    assert time.perf_counter() - started < 15
    assert "0 runs to do (2 done already)" in capsys.readouterr().out
    assert _lines(results) == lines

    # an interrupted run (its last model missing, a line cut short) goes on from its last
    # scored model on a new campaign that starts from the run's labels
    before = [r for r in lines if r["acquisition"] == "qb-mgp"]
    kept = [r for r in lines if (r["acquisition"], r["n_labeled"]) != ("qb-mgp", 6)]
    text = "".join(json.dumps(r) + "\n" for r in kept)
    results.write_text(text + '{"simulator": "gramacy1d", "acq')
    cli(["bench", "--url", api_url, "--out", str(tmp_path), "--parallel", "1", *ARGS])
    assert "1 runs to do (1 done already, 1 going on from where they stopped)" in (
        capsys.readouterr().out
    )
    after = _lines(results)
    assert len(after) == 8
    assert [r for r in after if r["acquisition"] == "alm"] == [
        r for r in lines if r["acquisition"] == "alm"
    ]
    went_on = [r for r in after if r["acquisition"] == "qb-mgp"]
    assert [r["n_labeled"] for r in went_on] == [3, 4, 5, 6]
    assert went_on[:2] == before[:2]  # kept as they were
    # the model on the same 5 labels is scored again, then the run goes on, on a new campaign
    assert (went_on[2]["x"], went_on[2]["y"]) == (before[2]["x"], before[2]["y"])
    assert went_on[2]["campaign"] == went_on[3]["campaign"] != before[0]["campaign"]
    assert [r["model_version"] for r in went_on] == [3, 4, 5, 6]
    # the new label's noise is the run's third draw, as if nothing had stopped it
    sim, rng = get_simulator("gramacy1d"), label_rng(setup.seed, "qb-mgp")
    for r in went_on[1:]:
        np.testing.assert_allclose(sim.sample(np.array(r["x"]), rng), r["y"], rtol=1e-12)
    assert len(read_results(results)) == 8

    # --report-only runs nothing: it rewrites the report from the results file alone
    cli(["bench", "--url", "http://127.0.0.1:9", "--out", str(tmp_path), "--report-only", *ARGS])
    assert _lines(results) == after
    summary = (tmp_path / "summary.md").read_text()
    assert "this invocation: the report only" in summary and "2 finished runs" in summary

    # runs that may label pool points again are another protocol: not mixed into this file
    with pytest.raises(SystemExit, match="without --allow-repeats; use another --out"):
        cli(["bench", "--url", api_url, "--out", str(tmp_path), "--allow-repeats", *ARGS])
    assert _lines(results) == after


def test_allow_repeats_reaches_the_campaign_and_the_records(api_url, tmp_path):
    out = tmp_path / "repeats"
    args = [a if a != "alm,qb-mgp" else "alm" for a in ARGS]
    cli(["bench", "--url", api_url, "--out", str(out), "--allow-repeats", *args])
    lines = _lines(out / "results.jsonl")
    assert [r["n_labeled"] for r in lines] == [3, 4, 5, 6]
    assert all(r["allow_repeats"] is True for r in lines)
    assert paper_body("gramacy1d", "alm", 0, 3, "fast", allow_repeats=True)["allow_repeats"]
    assert not paper_body("gramacy1d", "alm", 0, 3, "fast")["allow_repeats"]
    assert "pool points may be labeled again" in (out / "summary.md").read_text()


BASE = ["--simulators", "gramacy1d", "--acquisitions", "alm,bald", "--runs", "1"]
SETTINGS = ("allow_repeats", "bald", "mcmc", "input_scaling", "initial_design")


def _settings(args) -> dict:
    return {name: getattr(args, name) for name in SETTINGS}


def test_the_default_protocol_is_todays():
    args = parse_args(BASE)
    assert args.protocol == "paper"
    assert (
        _settings(args)
        == PROTOCOLS["paper"]
        == {
            "allow_repeats": False,
            "bald": "bald",
            "mcmc": "paper",
            "input_scaling": "box",
            "initial_design": "pool",
        }
    )
    bald = plan(args)[1]
    assert bald.acquisition == bald.service_acquisition == "bald"
    body = spec_body(bald)
    # today's body: no input_scaling field, the paper's preset, no repeats
    assert "input_scaling" not in body and body["acquisition"] == "bald"
    assert body["mcmc"] == MCMC_PRESETS["paper"] and body["allow_repeats"] is False


def test_paper_code_sets_all_five():
    args = parse_args([*BASE, "--protocol", "paper-code"])
    assert _settings(args) == {
        "allow_repeats": True,
        "bald": "bald-code",
        "mcmc": "paper-code",
        "input_scaling": "labels",
        "initial_design": "continuous",
    }
    alm, bald = plan(args)
    assert (bald.acquisition, bald.service_acquisition) == ("bald", "bald-code")
    assert alm.service_acquisition == "alm"
    body = spec_body(bald)
    assert body["acquisition"] == "bald-code" and body["input_scaling"] == "labels"
    assert body["allow_repeats"] is True and body["mcmc"]["mode_rule"] == "kde-raw"
    assert body["name"] == "bench-gramacy1d-bald-run0"
    assert bald.record_fields() == {
        "mcmc": "paper-code",
        "allow_repeats": True,
        "service_acquisition": "bald-code",
        "input_scaling": "labels",
        "initial_design": "continuous",
        "protocol": "paper-code",
    }


@pytest.mark.parametrize(
    ("option", "setting", "value"),
    [
        (["--allow-repeats"], "allow_repeats", True),
        (["--bald", "bald-code"], "bald", "bald-code"),
        (["--mcmc", "fast"], "mcmc", "fast"),
        (["--input-scaling", "labels"], "input_scaling", "labels"),
        (["--initial-design", "continuous"], "initial_design", "continuous"),
    ],
)
def test_one_option_alone_changes_one_setting(option, setting, value):
    args = parse_args([*BASE, *option])
    assert _settings(args) == {**PROTOCOLS["paper"], setting: value}
    assert plan(args)[0].protocol == "custom"  # no named protocol


def test_options_given_override_the_protocols():
    args = parse_args(
        [
            *BASE,
            "--protocol",
            "paper-code",
            "--mcmc",
            "fast",
            "--no-allow-repeats",
            "--bald",
            "bald",
        ]
    )
    assert _settings(args) == {
        **PROTOCOLS["paper-code"],
        "mcmc": "fast",
        "allow_repeats": False,
        "bald": "bald",
    }
    # the five options spelled out are the protocol itself
    spelled = parse_args(
        [
            *BASE,
            "--allow-repeats",
            "--bald",
            "bald-code",
            "--mcmc",
            "paper-code",
            "--input-scaling",
            "labels",
            "--initial-design",
            "continuous",
        ]
    )
    assert plan(spelled)[1].protocol == "paper-code"


def test_an_unknown_preset_is_an_error(monkeypatch):
    monkeypatch.setattr(
        bench, "MCMC_PRESETS", {k: v for k, v in MCMC_PRESETS.items() if k != "paper-code"}
    )
    with pytest.raises(SystemExit):
        parse_args([*BASE, "--protocol", "paper-code"])


def _records(spec: RunSpec, labels: int, **fields) -> list[dict]:
    """Made-up records of ``spec``'s run with its protocol fields (overridden by ``fields``)."""
    return run_records(
        spec, labels, **{**spec.record_fields(), "max_labels": spec.max_labels, **fields}
    )


def _write(path, records):
    path.write_text("".join(json.dumps(r) + "\n" for r in records))


def test_resume_refuses_to_mix_protocols(tmp_path):
    path = tmp_path / "results.jsonl"
    paper = RunSpec("gramacy1d", "bald", 0, 2)
    code = RunSpec(
        "gramacy1d",
        "bald",
        0,
        2,
        "paper-code",
        allow_repeats=True,
        bald="bald-code",
        input_scaling="labels",
        initial_design="continuous",
    )
    _write(path, _records(paper, 5))
    assert resume(path, [paper]) == ([], {})  # complete, same protocol: nothing to do
    with pytest.raises(SystemExit, match="use another --out"):
        resume(path, [code])
    # each setting alone is another protocol
    for change, message in [
        ({"bald": "bald-code"}, "service acquisition"),
        ({"input_scaling": "labels"}, "--input-scaling"),
        ({"initial_design": "continuous"}, "--initial-design"),
        ({"allow_repeats": True}, "without --allow-repeats"),
    ]:
        other = RunSpec("gramacy1d", "bald", 0, 2, **change)
        with pytest.raises(SystemExit, match=message):
            resume(path, [other])
    # records written before the fields existed read as the paper protocol
    old = [
        {k: v for k, v in r.items() if k not in (*code.record_fields(), "allow_repeats")}
        | {"mcmc": "paper"}
        for r in _records(paper, 5)
    ]
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


def test_paper_code_end_to_end(api_url, tmp_path):
    """Needs the service side: input_scaling, bald-code and nlml_paper. A tiny preset."""
    cli(
        [
            "bench",
            "--url",
            api_url,
            "--out",
            str(tmp_path),
            *BASE,
            "--protocol",
            "paper-code",
            "--mcmc",
            "fast",
            "--iterations",
            "2",
            "--no-progress",
        ]
    )
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
    cli(
        [
            "bench",
            "--url",
            api_url,
            "--out",
            str(tmp_path),
            "--simulators",
            "gramacy1d",
            "--acquisitions",
            "alm",
            "--runs",
            "1",
            "--initial-design",
            "continuous",
            "--mcmc",
            "fast",
            "--iterations",
            "1",
            "--no-progress",
        ]
    )
    lines = [json.loads(x) for x in (tmp_path / "results.jsonl").read_text().splitlines()]
    assert [r["n_labeled"] for r in lines] == [3, 4]
    setup = run_setup("gramacy1d", 0, design="continuous")
    np.testing.assert_array_equal(lines[0]["x"], setup.initial_x)
    assert {r["initial_design"] for r in lines} == {"continuous"}
    assert {r["protocol"] for r in lines} == {"custom"}
