"""One run of a user's executable for ``fbgp-al run`` (:mod:`clients.ops.run`): its argument
list with a point's values put in its placeholders (:func:`command_for`), the command run with a
timeout and killed with its process group when the runner stops (:class:`CommandRunner`), and
y read from the last line of its output (:func:`parse_y`). A non-zero exit, a timeout or an
output that is not a finite number is :class:`CommandFailed`, with the tail of its stderr."""

from __future__ import annotations

import contextlib
import json
import logging
import math
import os
import re
import signal
import subprocess
import threading
import time
from collections.abc import Collection

from fbgp_al.worker.vocabulary.space import decimal

log = logging.getLogger("fbgp.run")

POLL_SECONDS = 0.1  # how often a running command is checked for a stop
TAIL_CHARACTERS = 1500  # of stderr in a failure's reason


class CommandFailed(RuntimeError):
    """The command exited non-zero, timed out or printed no float (the reason says which)."""


class Stopped(KeyboardInterrupt):
    """A signal stopped the runner while the command ran: its ticket is abandoned."""


def command_for(
    template: list[str],
    names: list[str],
    x: list,
    integers: Collection[str] = (),
    fidelity: str | None = None,
) -> tuple[list[str], str | None]:
    """The command for point ``x`` and what to write to its stdin (None: nothing): the
    placeholders of ``template`` replaced, or the point's JSON on stdin if it has none.
    ``integers``: the names of the campaign's int inputs, whose values stay integers;
    ``fidelity``: the level to run ``x`` at, in a campaign with fidelities (``{fidelity}``,
    and a key of the JSON)."""
    point = {n: _value(v, n in integers) for n, v in zip(names, x, strict=True)}
    if fidelity is not None:
        point["fidelity"] = fidelity
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
    return int(v) if integer else float(decimal(float(v)))


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

    def __call__(self, x: list, fidelity: str | None = None) -> float:
        argv, stdin = command_for(self.template, self.names, x, self.integers, fidelity)
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
