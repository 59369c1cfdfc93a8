"""``fbgp-al run``: any executable as a simulator.

    fbgp-al run --url URL --campaign ID [--token T] [--parallel K] [--timeout S] -- CMD ARG...

Each point is run as ``CMD ARG...`` with the placeholders in its arguments replaced: ``{NAME}``
by the coordinate of the campaign's input ``NAME`` (``repr`` of the float to 15 significant
digits, an int input's integer, a choice input's value as text), ``{json}`` by the point as a
JSON object ``{"NAME": value, ...}``. With no placeholder at all, that JSON object is
written to the command's stdin. y is the last non-empty line of its stdout, a float (or two,
``y noise``, the second its noise variance, in a campaign with known noise); in a campaign with
several outputs ``name=value`` pairs (``stress=1.5 disp=0.02``) or a JSON object, ``{"stress":
1.5, "disp": 0.02}`` (or ``{"y": {..}, "noise": {..}}`` with known noise). A non-zero
exit, a timeout or an output that is not a finite float reports the ticket failed, with the
tail of the command's stderr (or its output) as the reason, and the next point is run.

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
SIGTERM). The loop is :func:`clients.runner.run_simulator`'s, one per slot.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import math
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Collection

import httpx
from tqdm import tqdm
from tqdm.contrib.logging import logging_redirect_tqdm

from fbgp_al.clients.client import ApiError, CampaignStatus, FbgpClient
from fbgp_al.clients.ops import described
from fbgp_al.clients.runner import run_simulator

log = logging.getLogger("fbgp.run")
POLL_SECONDS = 0.1  # how often a running command is checked for a stop
TAIL_CHARACTERS = 1500  # of stderr in a failure's reason


class CommandFailed(RuntimeError):
    """The command exited non-zero, timed out or printed no float (the reason says which)."""


class Stopped(KeyboardInterrupt):
    """A signal stopped the runner while the command ran: its ticket is abandoned."""


def command_for(
    template: list[str], names: list[str], x: list, integers: Collection[str] = ()
) -> tuple[list[str], str | None]:
    """The command for point ``x`` and what to write to its stdin (None: nothing): the
    placeholders of ``template`` replaced, or the point's JSON on stdin if it has none.
    ``integers``: the names of the campaign's int inputs, whose values stay integers."""
    point = {n: _value(v, n in integers) for n, v in zip(names, x, strict=True)}
    values = {
        "{json}": json.dumps(point),
        **{"{" + n + "}": v if isinstance(v, str) else repr(v) for n, v in point.items()},
    }
    # one pass over each argument: a value that reads like a placeholder (a choice "{n}") is
    # put in as it is, never expanded in turn
    pattern = re.compile("|".join(re.escape(p) for p in sorted(values, key=len, reverse=True)))
    used = any(pattern.search(arg) for arg in template)
    argv = [pattern.sub(lambda match: values[match.group(0)], arg) for arg in template]
    return argv, None if used else json.dumps(point)


def _value(v, integer: bool):
    """A coordinate as the command gets it: text (a choice's value) as it is, an int input's
    value as an integer, any other number as a float of at most 15 significant digits (a grid
    level as its shortest decimal, 4.325, should a service send 4.324999999999999)."""
    if isinstance(v, str):
        return v
    return int(v) if integer else float(f"{float(v):.15g}")


def parse_y(stdout: str) -> float | tuple[float, float] | dict:
    """y from a command's output: its last non-empty line, a finite float; or two, ``y noise``
    (the variance of y, for a campaign with known noise), as ``(y, noise)``; with several
    outputs ``name=value`` pairs or a JSON object, as a dict (checked by
    :func:`clients.runner.label_of`)."""
    lines = [line.strip() for line in stdout.splitlines() if line.strip()]
    if not lines:
        raise CommandFailed("the command printed nothing on stdout (y expected)")
    if lines[-1].startswith("{"):
        try:
            value = json.loads(lines[-1])
        except ValueError:
            raise CommandFailed(
                f"the last line of stdout is not a JSON object: {lines[-1][:200]!r}"
            ) from None
        if not isinstance(value, dict):
            raise CommandFailed("the last line of stdout is not a JSON object")
        return value
    words = lines[-1].split()
    if words and all("=" in w for w in words):
        try:
            return {w.split("=", 1)[0]: float(w.split("=", 1)[1]) for w in words}
        except ValueError:
            raise CommandFailed(
                f"the last line of stdout is not name=value pairs of floats: {lines[-1][:200]!r}"
            ) from None
    try:
        if len(words) > 2:
            raise ValueError
        values = [float(w) for w in words]
    except ValueError:
        raise CommandFailed(
            f"the last line of stdout is not a float (or two, y and its noise variance): "
            f"{lines[-1][:200]!r}"
        ) from None
    if not all(math.isfinite(v) for v in values):
        raise CommandFailed(f"the command printed {lines[-1]!r}, not a finite number")
    if len(values) == 2:
        if values[1] < 0:
            raise CommandFailed(f"the command printed a negative noise variance: {lines[-1]!r}")
        return values[0], values[1]
    return values[0]


def _tail(text: str) -> str:
    text = text.strip()
    return text if len(text) <= TAIL_CHARACTERS else "..." + text[-TAIL_CHARACTERS:]


class CommandRunner:
    """Runs the command for a point; stops every command it runs when :meth:`stop` is called."""

    def __init__(
        self,
        template: list[str],
        names: list[str],
        timeout: float | None = None,
        integers: Collection[str] = (),
    ):
        self.template, self.names, self.timeout = template, names, timeout
        self.integers = frozenset(integers)
        self.stopping = threading.Event()

    def stop(self) -> None:
        self.stopping.set()

    def __call__(self, x: list) -> float:
        argv, stdin = command_for(self.template, self.names, x, self.integers)
        if self.stopping.is_set():
            raise Stopped()
        try:
            process = subprocess.Popen(
                argv,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                start_new_session=True,
            )
        except OSError as error:
            raise CommandFailed(f"cannot run {argv[0]!r}: {error}") from None
        started = time.monotonic()
        pending_input = stdin if stdin is not None else ""
        while True:
            try:
                out, err = process.communicate(pending_input, timeout=POLL_SECONDS)
                break
            except subprocess.TimeoutExpired:
                pending_input = None
            if self.stopping.is_set():
                _kill(process)
                raise Stopped()
            if self.timeout is not None and time.monotonic() - started > self.timeout:
                _kill(process)
                raise CommandFailed(f"timed out after {self.timeout:g} s")
        if process.returncode != 0:
            raise CommandFailed(f"exit status {process.returncode}: {_tail(err)}")
        try:
            return parse_y(out)
        except CommandFailed as error:
            detail = f"{error}; stderr: {_tail(err)}" if err.strip() else str(error)
            raise CommandFailed(detail) from None


def _kill(process: subprocess.Popen) -> None:
    """The command and whatever it started (its own session)."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    process.communicate()


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
    far) and wait until no refit is queued or running; without, say that it still fits."""
    fitting = status.refit != "idle"
    if fitting and not wait:
        return (
            f"; the model of its last labels is still fitting (model {status.model_version} in now)"
        )
    if fitting:
        print(
            f"{said}; waiting for the model of its last labels (Ctrl-C leaves it fitting)",
            file=sys.stderr,
        )
    try:
        while status.refit != "idle":
            time.sleep(poll)
            status = api.campaign(status.id)
    except KeyboardInterrupt:
        return f"; the model of its last labels is still fitting (model {status.model_version})"
    if status.last_error and (status.model_version or 0) < status.n_labeled:
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
