"""``fbgp-al run``: any executable as a simulator.

    fbgp-al run --url URL --campaign ID [--token T] [--parallel K] [--timeout S] -- CMD ARG...

Each point is run as ``CMD ARG...`` with the placeholders in its arguments replaced: ``{NAME}``
by the coordinate of the campaign's input ``NAME`` (``repr`` of the float to 15 significant
digits, an int input's integer, a choice input's value as text), ``{json}`` by the point as a
JSON object ``{"NAME": value, ...}``; in a campaign with fidelities ``{fidelity}`` by the name
of the level to run the point at (and the JSON object has it under ``fidelity``). With no
placeholder at all, that JSON object is written to the command's stdin. y is the last non-empty
line of its stdout, a float (or two, ``y noise``, the second its noise variance, in a campaign
with known noise); in a campaign with several outputs ``name=value`` pairs (``stress=1.5
disp=0.02``) or a JSON object, ``{"stress": 1.5, "disp": 0.02}`` (or ``{"y": {..}, "noise":
{..}}`` with known noise). A non-zero exit, a timeout or an output that is not a finite float
reports the ticket failed, with the tail of the command's stderr (or its output) as the reason,
and the next point is run.

``--parallel K`` runs K commands at once, each under a ticket of its own (for parallel-mode
campaigns, ``max_pending`` >= K; a sequential campaign hands out one point at a time, and the
runner says so). A progress bar counts labels and failed runs (on a terminal); ``-v`` logs
each HTTP request too. The last line says why the runner ended: the campaign's stopping rule,
``max_labels`` reached, the pool used up, the campaign failing, stalled or failed, a signal;
with the runs posted, failed, and the commonest reasons of the failures. A campaign done while
the model of its last labels still fits: the runner says so and waits for that model (then
the page and ``fbgp-al export`` give the final model), and the last line names it;
``--no-wait-model`` leaves it fitting.

SIGINT (Ctrl-C) or SIGTERM kills the commands running,
abandons their tickets (their points are offered again at once) and exits 130 (143 for
SIGTERM). The loop is :func:`clients.runner.run_simulator`'s, one per slot; a point's command
is run by :mod:`clients.ops.commands`.
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import threading

import httpx
from tqdm import tqdm
from tqdm.contrib.logging import logging_redirect_tqdm

from fbgp_al.clients.client import ApiError, CampaignStatus, FbgpClient
from fbgp_al.clients.errors import RefitFailed
from fbgp_al.clients.ops import described
from fbgp_al.clients.ops.commands import CommandRunner, Stopped
from fbgp_al.clients.runner import run_simulator

log = logging.getLogger("fbgp.run")


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    if "--" in argv:
        split = argv.index("--")
        own, template = argv[:split], argv[split + 1 :]
    else:
        own, template = argv, []
    parser = argparse.ArgumentParser(
        prog="fbgp-al run",
        description=described(__doc__),
        usage="fbgp-al run --url URL --campaign ID [options] -- COMMAND [ARG...]",
    )
    parser.add_argument("--url", required=True, help="the service, e.g. http://127.0.0.1:8000")
    parser.add_argument("--campaign", required=True, help="the campaign's id")
    parser.add_argument("--token", default=None, help="bearer token [FBGP_API_TOKEN]")
    parser.add_argument("--parallel", type=int, default=1, help="commands at once [1]")
    parser.add_argument("--timeout", type=float, default=None, help="seconds per command")
    parser.add_argument("--wait", type=float, default=20.0, help="seconds per long poll [20]")
    parser.add_argument(
        "--max-labels",
        type=int,
        default=None,
        help="take no more points once this runner (all slots together) "
        "posted this many labels; the runs under way finish",
    )
    parser.add_argument(
        "--no-wait-model",
        action="store_true",
        help="exit once the campaign is done, without waiting for the model of its last labels",
    )
    parser.add_argument(
        "-v", "--verbose", action="store_true", help="log every HTTP request and the runner's steps"
    )
    args = parser.parse_args(own)
    if not template:
        parser.error("give the command after --, e.g. -- ./simulate.sh {x1} {x2}")
    if args.parallel < 1:
        parser.error("--parallel must be at least 1")
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING, format="%(asctime)s %(message)s"
    )
    raise SystemExit(
        run(
            args.url,
            args.campaign,
            template,
            token=args.token,
            parallel=args.parallel,
            timeout=args.timeout,
            wait=args.wait,
            max_labels=args.max_labels,
            wait_model=not args.no_wait_model,
        )
    )


def run(
    url: str,
    campaign_id: str,
    template: list[str],
    *,
    token: str | None = None,
    parallel: int = 1,
    timeout: float | None = None,
    wait: float = 20.0,
    max_labels: int | None = None,
    wait_model: bool = True,
) -> int:
    """Label the campaign with the command in ``parallel`` slots until it is done (and, with
    ``wait_model``, until the model of its last labels is in); the exit status: 0 done, 1 a
    slot failed (the service unreachable, the campaign stalled), 130 or 143 stopped by SIGINT
    or SIGTERM."""
    with FbgpClient(url, token) as api:
        start = api.campaign(campaign_id)
    inputs = start.inputs
    warning = parallel_warning(start, parallel)
    if warning:
        print(f"fbgp-al run: {warning}", file=sys.stderr)
    names = [i["name"] for i in inputs]
    if not names:
        print("fbgp-al run: the service does not say the campaign's inputs", file=sys.stderr)
        return 1
    integers = [i["name"] for i in inputs if i.get("type") == "int"]
    blind = blind_to_level(start, template)
    if blind:
        print(f"fbgp-al run: {blind}", file=sys.stderr)
        return 2
    runner = CommandRunner(template, names, timeout, integers)
    counts = {"labels": 0, "failures": 0}
    reasons: dict[str, int] = {}  # the failed runs' reasons (their last line), counted
    errors: list[BaseException] = []
    lock = threading.Lock()

    bar = tqdm(
        total=start.max_labels,
        initial=start.n_labeled,
        unit="label",
        file=sys.stderr,
        desc="labels",
        dynamic_ncols=True,
    )
    bar.set_postfix(failed=0)

    def count(key: str, reason: str | None = None) -> None:
        with lock:
            counts[key] += 1
            if reason is not None:
                line = _last_line(reason)
                reasons[line] = reasons.get(line, 0) + 1
            if key == "labels":
                bar.update(1)
            else:
                bar.set_postfix(failed=counts["failures"])

    def enough() -> bool:  # the runner's labels, all slots together
        with lock:
            return max_labels is not None and counts["labels"] >= max_labels

    def slot() -> None:
        try:
            run_simulator(
                url,
                campaign_id,
                runner,
                token=token,
                wait=wait,
                on_label=lambda x, y, n: count("labels"),
                on_failure=lambda x, reason: count("failures", reason),
                should_stop=lambda: runner.stopping.is_set() or enough(),
            )
        except Stopped:
            pass
        except Exception as error:  # the service out of reach, the campaign stalled (409)
            errors.append(error)
            log.error("stopped: %s", error)

    signalled: list[int] = []

    def on_signal(number, frame) -> None:
        signalled.append(number)
        runner.stop()

    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    # a failed run's log line prints above the bar, not through it
    with logging_redirect_tqdm(loggers=[logging.getLogger()]):
        try:
            threads = [
                threading.Thread(target=slot, name=f"slot-{k}", daemon=True)
                for k in range(parallel)
            ]
            for thread in threads:
                thread.start()
            while any(thread.is_alive() for thread in threads):
                for thread in threads:
                    thread.join(timeout=0.2)
        finally:
            for number, handler in previous.items():
                signal.signal(number, handler)
    bar.close()
    tally = f"{counts['labels']} labels posted, {counts['failures']} runs failed"
    if reasons:
        common = sorted(reasons.items(), key=lambda item: -item[1])[:2]
        tally += " (" + ", ".join(f"{n} x {text!r}" for text, n in common) + ")"
    if signalled:
        why = f"stopped by {signal.Signals(signalled[0]).name}"
    elif max_labels is not None and counts["labels"] >= max_labels and not errors:
        why = f"this runner's --max-labels ({max_labels}) reached"
    else:
        try:
            with FbgpClient(url, token) as api:
                status = api.campaign(campaign_id)
                why = ended_because(status)
                if status.state == "done":
                    why += final_model(api, status, wait_model, f"fbgp-al run: {tally}; {why}")
        except (ApiError, httpx.HTTPError) as error:
            why = f"the service could not say why: {error}"
    print(f"fbgp-al run: {tally}; {why}", file=sys.stderr)
    if signalled:
        return 128 + signalled[0]
    return 1 if errors else 0


def final_model(
    api: FbgpClient, status: CampaignStatus, wait: bool, said: str, poll: float = 0.5
) -> str:
    """A done campaign's final model, the words to add to the last line: the model of its last
    labels, once in. While it still fits, with ``wait``, say so (after ``said``, the line so
    far) and wait for it (:meth:`FbgpClient.wait_for_model`); without, say that it still
    fits."""
    if (status.model_version or 0) < status.n_labeled and status.refit != "idle":
        if not wait:
            return (
                f"; the model of its last labels is still fitting (model {status.model_version} "
                "in now)"
            )
        print(
            f"{said}; waiting for the model of its last labels (Ctrl-C leaves it fitting)",
            file=sys.stderr,
        )
    try:
        status = api.wait_for_model(status.id, status.n_labeled, poll=poll)
    except KeyboardInterrupt:
        return f"; the model of its last labels is still fitting (model {status.model_version})"
    except RefitFailed:
        status = api.campaign(status.id)
        return (
            f"; the refit of its last labels failed ({status.last_error}): model "
            f"{status.model_version} is the last"
        )
    return f"; model {status.model_version} of its {status.n_labeled} labels in"


def _last_line(reason: str, most: int = 80) -> str:
    """A failed run's reason as the summary shows it: its last non-empty line, cut short."""
    lines = [line.strip() for line in str(reason).splitlines() if line.strip()]
    text = lines[-1] if lines else "(no reason given)"
    return text if len(text) <= most else text[: most - 3] + "..."


def blind_to_level(status: CampaignStatus, template: list[str]) -> str | None:
    """Why the command cannot run a campaign with fidelities: it has placeholders, but neither
    ``{fidelity}`` nor ``{json}``, so it would not know the level of a run; None if it can."""
    if not status.raw.get("fidelities"):
        return None
    text = " ".join(template)
    if "{fidelity}" in text or "{json}" in text:
        return None
    names = [i["name"] for i in status.inputs]
    if not any("{" + n + "}" in text for n in names):
        return None  # the point's JSON on stdin, its level included
    levels = [f["name"] for f in status.raw["fidelities"]]
    return (
        f"the campaign has fidelities ({', '.join(levels)}): put {{fidelity}} in the command, "
        "where the level's name goes (or {json})"
    )


def parallel_warning(status: CampaignStatus, parallel: int) -> str | None:
    """A warning when ``--parallel`` runs more commands than the campaign hands out points:
    a sequential campaign gives one at a time after its initial design."""
    mode = status.raw.get("mode")
    if parallel > 1 and mode == "sequential":
        return (
            f"--parallel {parallel}, but the campaign is sequential: after its initial "
            "design it hands out one point at a time, so one command runs at a time (create "
            'it with "mode": "parallel" and "max_pending" to run several)'
        )
    return None


def ended_because(status: CampaignStatus) -> str:
    """Why a campaign gave its runner no more points, in words, from its status."""
    if status.stopped_by and status.stopped_by["rule"] == "max_cost":
        spent = status.stopped_by
        return f"done: its labels cost {spent['value']:g}, max_cost {spent['target']:g}"
    if status.stopped_by:
        rule = status.stopped_by
        return (
            f"its stopping rule was met: {rule['rule']} {rule['value']:.4g} <= "
            f"{rule['target']:.4g} at model {rule['version']}"
        )
    if status.state == "done" and status.n_labeled >= status.max_labels:
        return f"done: max_labels ({status.max_labels}) reached"
    if status.state == "done":
        return f"done: the pool is used up ({status.n_labeled} labels)"
    if status.state == "failed":
        return f"the campaign failed: its refits failed ({status.last_error}); POST .../retry"
    if status.failing:
        return (
            f"the campaign is failing: {status.n_failed} runs failed, more than its "
            "max_failures; fix the simulator, then POST .../retry"
        )
    if status.stalled:
        return (
            "the campaign stalled: runs failed and no point is left to offer (each failed "
            "for good, or below the failure model's min_success); POST .../retry (with "
            '{"forget_failures": true} if the simulator changed)'
        )
    return f"the campaign is {status.state} ({status.n_labeled} of {status.max_labels} labels)"
