"""``fbgp-al run``: any executable as a simulator, against a real API server, Redis and worker.
A command that fails for some points reports failures and the campaign still reaches ``done``;
SIGINT kills the command and abandons its ticket; a command may print several outputs. One
command's run: test_commands.py."""

import signal
import subprocess
import sys
import time

import httpx

from fbgp_al.clients.client import CampaignStatus, FbgpClient
from fbgp_al.clients.ops.run import ended_because, parallel_warning
from tests.conftest import ROOT

FAST = {"chains": 2, "warmup": 30, "samples": 20, "thinning": 2}
# y = sin(3x) + x; a run below x = 1.15 "diverges" (exit 3, a message on stderr); every LHS of
# three points in [0.5, 2.5] has one there
SCRIPT = """awk -v x="$1" 'BEGIN { if (x < 1.15) { print "solver diverged at " x > "/dev/stderr";
exit 3 } print "log line"; print sin(3 * x) + x }'"""


def _run_command(api_url: str, campaign: str, *command: str, parallel: int = 1):
    argv = [
        sys.executable,
        "-m",
        "fbgp_al.clients.ops.cli",
        "run",
        "--url",
        api_url,
        "--campaign",
        campaign,
        "--parallel",
        str(parallel),
        "--wait",
        "2",
        "--",
        *command,
    ]
    return subprocess.Popen(
        argv, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )


def test_a_failing_command_reports_failures_and_the_campaign_reaches_done(api_url, make_body):
    # the runs fail where x < 1.15, a third of the pool, where active learning is drawn while
    # no label is there: more failures than max_labels, so max_failures is raised
    body = make_body(
        name="run-cli", mcmc=FAST, max_labels=5, mode="parallel", max_pending=2, max_failures=50
    )
    with httpx.Client(base_url=api_url, timeout=30) as api:
        campaign = api.post("/campaigns", json=body).json()["id"]
        process = _run_command(api_url, campaign, "sh", "-c", SCRIPT, "sh", "{x}", parallel=2)
        out, _ = process.communicate(timeout=300)
        assert process.returncode == 0, out
        status = api.get(f"/campaigns/{campaign}").json()
        assert status["state"] == "done" and status["n_labeled"] == 5, status
        assert status["n_failed"] >= 1 and status["n_pending"] == 0
        # the runner waited for the model of the last label: the page and an export give it
        assert status["refit"] == "idle" and status["model_version"] == 5, status
        assert api.get(f"/campaigns/{campaign}/model/export").json()["version"] == 5
        data = api.get(f"/campaigns/{campaign}/observations").json()
    assert all(f["x"][0] < 1.15 for f in data["failures"])
    assert all(
        "solver diverged" in f["reason"] and "exit status 3" in f["reason"]
        for f in data["failures"]
    )
    assert all(x[0] >= 1.15 for x in data["x"]) and len(data["y"]) == 5
    # quiet: no line per HTTP request (-v has them); the last line says why it ended
    assert "HTTP Request" not in out
    last = out.strip().splitlines()[-1]
    assert last.startswith("fbgp-al run: 5 labels posted,") and "max_labels (5) reached" in last
    assert last.endswith("; model 5 of its 5 labels in"), last
    # the failures counted, with their commonest reasons (each its last line)
    assert f"{len(data['failures'])} runs failed (" in last, last
    assert " x 'CommandFailed: exit status 3: solver diverged at " in last, last


def test_the_runner_says_why_it_ended_and_warns_of_a_parallel_it_cannot_use():
    base = {"id": "c", "n_pending": 0, "max_labels": 20, "model_version": 9, "last_error": None}
    said = lambda **fields: ended_because(CampaignStatus.from_json({**base, **fields}))  # noqa: E731
    rule = {"rule": "loo_rmse", "value": 0.031, "target": 0.05, "version": 9, "at": 0.0}
    assert said(state="done", n_labeled=12, stopped_by=rule) == (
        "its stopping rule was met: loo_rmse 0.031 <= 0.05 at model 9"
    )
    assert said(state="done", n_labeled=20) == "done: max_labels (20) reached"
    spent = {"rule": "max_cost", "value": 104.0, "target": 100, "version": 14, "at": 0.0}
    assert said(state="done", n_labeled=14, stopped_by=spent) == (
        "done: its labels cost 104, max_cost 100"
    )
    assert "failing" in said(state="active", n_labeled=3, failing=True, n_failed=21)
    assert "stalled" in said(state="active", n_labeled=3, stalled=True)
    assert "refits failed (boom)" in said(state="failed", n_labeled=3, last_error="boom")
    sequential = CampaignStatus.from_json(
        {**base, "state": "active", "n_labeled": 0, "mode": "sequential"}
    )
    assert "one point at a time" in parallel_warning(sequential, 4)
    assert parallel_warning(sequential, 1) is None
    parallel = CampaignStatus.from_json(
        {**base, "state": "active", "n_labeled": 0, "mode": "parallel"}
    )
    assert parallel_warning(parallel, 4) is None


def test_sigint_kills_the_command_and_abandons_its_ticket(api_url, make_body):
    with httpx.Client(base_url=api_url, timeout=30) as api:
        campaign = api.post("/campaigns", json=make_body(name="run-stop")).json()["id"]
        process = _run_command(api_url, campaign, "sh", "-c", "cat >/dev/null; sleep 60; echo 1")
        deadline = time.monotonic() + 60
        while api.get(f"/campaigns/{campaign}").json()["n_pending"] == 0:
            assert process.poll() is None and time.monotonic() < deadline, process.stdout.read()
            time.sleep(0.2)
        time.sleep(0.5)  # the command runs
        process.send_signal(signal.SIGINT)
        out, _ = process.communicate(timeout=30)
        assert process.returncode == 128 + signal.SIGINT, out
        assert "stopped by SIGINT" in out.strip().splitlines()[-1]
        status = api.get(f"/campaigns/{campaign}").json()
    assert status["n_abandoned"] == 1 and status["n_pending"] == 0 and status["n_failed"] == 0


def test_fbgp_al_run_reads_several_outputs_from_a_command(api_url, make_body):
    body = make_body(
        name="run-outputs", outputs=[{"name": "stress"}, {"name": "disp"}], max_labels=4, mcmc=FAST
    )
    with FbgpClient(api_url, token="") as api:
        campaign = api.create_campaign(body).id
        process = _run_command(
            api_url,
            campaign,
            "sh",
            "-c",
            'echo working; echo "stress={x} disp=$(echo {x} | cut -c1-3)"',
        )
        out, _ = process.communicate(timeout=300)
        assert process.returncode == 0, out
        observed = api.observations(campaign)
    assert len(observed.y) == 4 and not observed.failures
    for x, y in zip(observed.x, observed.y, strict=True):
        assert y["stress"] == x[0] and y["disp"] == float(repr(x[0])[:3])


# Forrester's two levels: $1 the point, $2 the level's name
FORRESTER = """awk -v x="$1" -v level="$2" 'BEGIN { f = (6 * x - 2) ^ 2 * sin(12 * x - 4);
if (level == "fine") print f; else if (level == "coarse") print 0.5 * f + 10 * (x - 0.5) - 5;
else exit 4 }'"""


def test_a_command_runs_each_point_at_its_level(api_url, make_body):
    body = make_body(
        name="run-fidelity",
        inputs=[{"name": "x", "lower": 0.0, "upper": 1.0}],
        mcmc=FAST,
        fidelities=[{"name": "coarse", "cost": 1}, {"name": "fine", "cost": 10}],
        initial_design={"size": 6},
        max_labels=8,
        mode="parallel",
        max_pending=2,
    )
    with httpx.Client(base_url=api_url, timeout=30) as api:
        campaign = api.post("/campaigns", json=body).json()["id"]
        blind = _run_command(api_url, campaign, "sh", "-c", FORRESTER, "sh", "{x}")
        out, _ = blind.communicate(timeout=60)
        assert blind.returncode == 2 and "put {fidelity} in the command" in out, out
        process = _run_command(
            api_url, campaign, "sh", "-c", FORRESTER, "sh", "{x}", "{fidelity}", parallel=2
        )
        out, _ = process.communicate(timeout=300)
        assert process.returncode == 0, out
        status = api.get(f"/campaigns/{campaign}").json()
        assert status["state"] == "done" and status["n_labeled"] == 8 and status["n_failed"] == 0
        data = api.get(f"/campaigns/{campaign}/observations").json()
    assert sum(status["labels_per_fidelity"].values()) == 8
    for x, level, y in zip(data["x"], data["fidelity"], data["y"], strict=True):
        fine = (6 * x[0] - 2) ** 2 * __import__("math").sin(12 * x[0] - 4)
        expected = fine if level == "fine" else 0.5 * fine + 10 * (x[0] - 0.5) - 5
        assert abs(y - expected) < 1e-4 * max(1.0, abs(expected)), (x, level, y)
