"""The labeling loop's rules, as pure functions of a campaign's snapshot: what ``/next`` answers,
what a label's outcome is, and what reporting a run failed or abandoned (or renewing its lease)
does; whether a refit is due, dead or backing off is :mod:`service.supervision`'s.

No Redis, no FastAPI, no torch: the store reads a :class:`Snapshot` (one MULTI/EXEC) and the
routes and the workers act on the decisions. The Lua scripts in :mod:`service.store` stay the
ones that write, atomically; the rules they apply are stated in Python beside them, in
:mod:`service.store.rules`.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum

# hints for a client that must wait (Retry-After, seconds)
FULL_RETRY_SECONDS = 5.0  # every label that max_labels allows is stored or out
DESIGN_RETRY_SECONDS = 1.0  # the initial design is all out
REFIT_RETRY_BOUNDS = (1.0, 30.0)  # about one refit's duration, within these bounds
# the end of a ticket whose point was labeled under another ticket (rules.label_outcome)
SUPERSEDED = "superseded"


class Phase(StrEnum):
    """A campaign's state in its status."""

    DESIGN = "design"  # the initial design is being labeled
    ACTIVE = "active"  # a model chooses the points
    DONE = "done"  # max_labels labels are stored, or its stopping rule was met
    FAILED = "failed"  # its refit failed too often in a row: no refit until its owner retries
    # the states of a campaign in design or active that cannot go on by itself (the status, the
    # list, the page; the store's counts by phase keep design and active for them)
    FAILING = "failing"  # more runs failed than max_failures: no point until its owner retries
    STALLED = "stalled"  # runs failed and no point is left to offer (:func:`stalled`)


class RefitPhase(StrEnum):
    IDLE = "idle"
    QUEUED = "queued"
    RUNNING = "running"


class LabelOutcome(StrEnum):
    """What posting a label did (the store's scripts return these values)."""

    STORED = "stored"  # the first label of this ticket: stored now
    SAME_AGAIN = "same_again"  # the ticket has this label already: nothing changed
    CONFLICT = "conflict"  # the ticket has another label, or its point has one
    UNKNOWN_TICKET = "unknown_ticket"  # no such ticket in this campaign
    DONE = "done"  # the campaign has max_labels labels: nothing more is stored


class RunOutcome(StrEnum):
    """What reporting a ticket's run failed or abandoned did (the store's scripts return these)."""

    STORED = "stored"  # the ticket was out: its lease ended now and the report is stored
    SAME_AGAIN = "same_again"  # the ticket has this report already: nothing changed
    CONFLICT = "conflict"  # the ticket ended otherwise (a label, another report, superseded)
    UNKNOWN_TICKET = "unknown_ticket"


class RenewOutcome(StrEnum):
    RENEWED = "renewed"  # the lease runs ``lease_seconds`` from now
    EXPIRED = "expired"  # the lease ran out before: the point may be out again under another
    ENDED = "ended"  # the ticket was labeled, failed, abandoned or superseded
    UNKNOWN_TICKET = "unknown_ticket"


class ImportOutcome(StrEnum):
    STORED = "stored"
    TOO_MANY = "too_many"  # the observations would exceed max_labels: none is stored
    REPEATED = "repeated"  # without repeats, a pool point labeled already or twice: none stored
    SAME_AGAIN = "same_again"  # its Idempotency-Key's import was stored before: nothing more
    KEY_REUSED = "key_reused"  # its Idempotency-Key came with other observations: none stored


@dataclass(frozen=True)
class Rules:
    """The parts of a campaign's spec that the loop's rules read."""

    max_labels: int
    design_index: tuple[int, ...]  # the initial design's pool indices, in order
    mode: str  # "sequential" | "parallel"
    max_pending: int
    allow_repeats: bool
    max_retries: int = 0  # a failed point is offered again this many times
    max_failures: int | None = None  # more failures than this: the campaign is failing
    # pool indices that stand in, in order, for design points that failed for good
    design_reserve: tuple[int, ...] = ()
    # a failure model weighs the ranking (the spec's failures.model is not "none"): after a run
    # failed, a sequential campaign waits for the refit that learns from it
    failure_model: bool = False

    @property
    def design_size(self) -> int:
        return len(self.design_index)

    @property
    def failure_limit(self) -> int:
        return self.max_labels if self.max_failures is None else self.max_failures

    @classmethod
    def of(cls, spec: dict) -> Rules:
        max_failures = spec.get("max_failures")
        return cls(
            max_labels=int(spec["max_labels"]),
            design_index=tuple(spec["design_index"]),
            mode=spec.get("mode", "sequential"),
            max_pending=int(spec.get("max_pending", 1)),
            allow_repeats=bool(spec.get("allow_repeats", False)),
            max_retries=int(spec.get("max_retries", 0)),
            max_failures=None if max_failures is None else int(max_failures),
            design_reserve=tuple(spec.get("design_reserve", ())),
            failure_model=(spec.get("failures") or {}).get("model", "classifier") != "none",
        )


@dataclass(frozen=True)
class Refit:
    """A campaign's refit state (the store's ``state`` hash)."""

    phase: RefitPhase = RefitPhase.IDLE
    job: str = ""  # the id of the refit job in charge (its fencing token)
    merge: str = ""  # the job that merges its chain groups, if it fanned out
    queued_at: float = 0.0
    started_at: float = 0.0
    heartbeat: float = 0.0
    model_version: int | None = None  # the labels the latest model saw
    last_refit_seconds: float | None = None
    last_error: str | None = None
    changes: int = 0  # failures and abandons stored so far
    changes_seen: int = 0  # ... when the refit in charge started
    n_abandoned: int = 0  # tickets abandoned so far
    failures: int = 0  # refits failed in a row (an error, or its job died) since the last model
    retry_at: float = 0.0  # a failed refit runs again from then (0: none waits)
    failed: str | None = None  # why the campaign failed (too many refits failed in a row)
    stopped: str | None = None  # its stopping rule's verdict, as JSON (service.stopping), if met
    n_failed: int = 0  # runs reported failed so far
    n_forgiven: int = 0  # ... of them forgiven by the owner's retries (they count no more)

    @property
    def changed(self) -> bool:
        """Whether failures or abandons came after the refit in charge started."""
        return self.changes != self.changes_seen

    @classmethod
    def of(cls, state: dict) -> Refit:
        def number(key: str) -> float:
            return float(state.get(key) or 0.0)

        version, seconds = state.get("model_version"), state.get("last_refit_seconds")
        return cls(
            phase=RefitPhase(state.get("refit") or "idle"),
            job=state.get("refit_job") or "",
            merge=state.get("refit_merge") or "",
            queued_at=number("queued_at"),
            started_at=number("started_at"),
            heartbeat=number("heartbeat"),
            model_version=int(version) if version not in (None, "") else None,
            last_refit_seconds=float(seconds) if seconds else None,
            last_error=state.get("last_error") or None,
            changes=int(number("changes")),
            changes_seen=int(number("changes_seen")),
            n_abandoned=int(number("n_abandoned")),
            failures=int(number("refit_failures")),
            retry_at=number("retry_at"),
            failed=state.get("failed") or None,
            stopped=state.get("stopped") or None,
            n_failed=int(number("n_failed")),
            n_forgiven=int(number("n_forgiven")),
        )


@dataclass(frozen=True)
class Ticket:
    """A ticket out: its id, its point, when its lease runs out, and the model version that
    chose the point (None: the initial design's)
    (:meth:`service.store.tickets.Tickets.issue`); in a campaign with fidelities, the point
    as declared and the level to run it at (``fidelity``, its name)."""

    ticket: str
    x: list
    expires_at: float
    model_version: int | None
    fidelity: str | None = None


@dataclass(frozen=True)
class Snapshot:
    """A campaign's labeling state at one instant
    (:meth:`service.store.tickets.Tickets.snapshot`)."""

    n_labeled: int
    n_pending: int  # tickets out under a live lease
    pending: frozenset[int | str]  # their pool indices (or a point off the pool's key)
    labeled: frozenset[int]  # pool indices that have a label
    refit: Refit
    # the latest model's pool indices (or keys of points off the pool), in the order to hand out
    ranking: tuple[int | str, ...] = ()
    failures: Mapping[int, int] = field(default_factory=dict)  # pool index -> failed runs
    # the latest model's points off the pool: key -> its values (worker.fitting.search)
    off_pool: Mapping[str, list] = field(default_factory=dict)
    # keys of points off the pool handed out already (each once: it has no pool index to mark)
    offered: frozenset[str] = frozenset()
    pending_x: tuple[list, ...] = ()  # the values of the points off the pool out

    def issued(self, index: int | str | None) -> Snapshot:
        """This snapshot with one more ticket out, for pool point ``index`` (or the point off
        the pool of that key)."""
        pending = self.pending if index is None else self.pending | {index}
        return replace(self, n_pending=self.n_pending + 1, pending=pending)


@dataclass(frozen=True)
class Offer:
    """Hand out pool point ``index`` (or the latest model's point off the pool of that key),
    chosen by model ``version`` (None: the initial design)."""

    index: int | str
    version: int | None


@dataclass(frozen=True)
class Wait:
    """No point can be given yet; ask again in about ``seconds``."""

    seconds: float


@dataclass(frozen=True)
class Done:
    """The campaign has max_labels labels, or its stopping rule was met (``stopped``: the JSON
    of :func:`service.stopping.stop_verdict`'s verdict)."""

    stopped: str | None = None


@dataclass(frozen=True)
class Stalled:
    """No point can be offered, and none will be: nothing is out, no refit is coming, and every
    point left failed for good (:func:`stalled`)."""


@dataclass(frozen=True)
class Failed:
    """The campaign failed (``reason``): no point is chosen until its owner retries it."""

    reason: str


@dataclass(frozen=True)
class Failing:
    """More runs failed since the owner's last retry (``failed``) than ``max_failures``
    (``limit``): no point is handed out until the owner retries the campaign (:func:`failing`),
    so that simulators that crash on everything cannot use up the pool."""

    failed: int
    limit: int


Answer = Offer | Wait | Done | Stalled | Failed | Failing


def phase(rules: Rules, n_labeled: int, failed: bool = False, stopped: bool = False) -> Phase:
    if failed:
        return Phase.FAILED
    if n_labeled >= rules.max_labels or stopped:
        return Phase.DONE
    return Phase.DESIGN if n_labeled < rules.design_size else Phase.ACTIVE


def state(phase_now: Phase, is_failing: bool, is_stalled: bool) -> Phase:
    """The state a status says: a campaign in design or active that cannot go on by itself is
    ``failing`` (:func:`failing`) or else ``stalled`` (:func:`stalled`); else its phase."""
    if phase_now not in (Phase.DESIGN, Phase.ACTIVE):
        return phase_now
    if is_failing:
        return Phase.FAILING
    return Phase.STALLED if is_stalled else phase_now


def next_answers(rules: Rules, snap: Snapshot, count: int) -> list[Offer] | Answer:
    """Up to ``count`` points to hand out at once, as :func:`next_answer` would hand them out
    one after the other (each counted out before the next is chosen); or, when not even one can
    be, what :func:`next_answer` answers instead."""
    offers: list[Offer] = []
    while len(offers) < count:
        answer = next_answer(rules, snap)
        if not isinstance(answer, Offer):
            return offers or answer
        offers.append(answer)
        snap = snap.issued(answer.index)
    return offers


def next_answer(rules: Rules, snap: Snapshot) -> Answer:
    """What ``/next`` answers. The initial design's points may all be out at once; after it,
    ``sequential`` hands out a point only from a model that saw every label and with none out,
    ``parallel`` up to ``max_pending`` at once from any model. Never a point that is out under a
    live lease, never one with a label (unless repeats are allowed), never more tickets out
    than ``max_labels`` minus the labels stored."""
    n = snap.n_labeled
    if n >= rules.max_labels:
        return Done()
    if snap.refit.stopped:
        return Done(snap.refit.stopped)
    if snap.refit.failed:
        return Failed(snap.refit.failed)
    if failing(rules, snap.refit.n_failed, snap.refit.n_forgiven):
        return Failing(snap.refit.n_failed - snap.refit.n_forgiven, rules.failure_limit)
    if n + snap.n_pending >= rules.max_labels:
        return Wait(FULL_RETRY_SECONDS)
    if stalled(rules, snap):
        return Stalled()
    taken = _taken(rules, snap)
    if n < rules.design_size:
        index = _first_free(design_points(rules, snap), taken | snap.labeled)
        return Wait(DESIGN_RETRY_SECONDS) if index is None else Offer(index, None)
    version = snap.refit.model_version
    low, high = REFIT_RETRY_BOUNDS
    wait = Wait(max(low, min(high, snap.refit.last_refit_seconds or low)))
    if rules.mode == "sequential" and (version != n or snap.n_pending > 0):
        return wait
    if rules.mode == "sequential" and _learning_failures(rules, snap):
        return wait
    if rules.mode == "parallel" and (version is None or snap.n_pending >= rules.max_pending):
        return wait
    index = _first_free(snap.ranking, taken)
    return wait if index is None else Offer(index, version)


def _learning_failures(rules: Rules, snap: Snapshot) -> bool:
    """Whether the failure model has runs failed that the ranking did not see yet: runs have
    failed and a refit is queued or running, or failures came after the last one started."""
    refit = snap.refit
    return (
        rules.failure_model
        and refit.n_failed > 0
        and (refit.phase != RefitPhase.IDLE or refit.changed)
    )


def _first_free(indices: Sequence[int | str], taken: frozenset) -> int | str | None:
    return next((i for i in indices if i not in taken), None)


def _taken(rules: Rules, snap: Snapshot) -> frozenset[int]:
    """Points not to hand out now: out, labeled (unless repeats are allowed), failed for good,
    and points off the pool handed out once already (labeled, failed, or out).
    The initial design labels its distinct points even where repeats are allowed: a point of it
    that has a label is not offered again (repeats are the model's choice, not the design's)."""
    taken = snap.pending | failed_for_good(rules, snap) | snap.offered
    return taken if rules.allow_repeats else taken | snap.labeled


def failed_for_good(rules: Rules, snap: Snapshot) -> frozenset[int]:
    """Pool points whose runs failed more than ``max_retries`` times: never offered again."""
    return frozenset(i for i, count in snap.failures.items() if count > rules.max_retries)


def never_offered(spec: dict, snap: Snapshot) -> frozenset[int]:
    """Pool points a ranking leaves out: those labeled (unless the campaign allows repeats) and
    those failed for good (:func:`failed_for_good`)."""
    rules = Rules.of(spec)
    labeled = frozenset() if rules.allow_repeats else frozenset(snap.labeled)
    return labeled | failed_for_good(rules, snap)


def design_points(rules: Rules, snap: Snapshot) -> list[int]:
    """The initial design as it stands: its points in order, those failed for good (and
    unlabeled) replaced by the next of the reserve's."""
    gone = failed_for_good(rules, snap) - snap.labeled
    points = [i for i in rules.design_index + rules.design_reserve if i not in gone]
    return points[: rules.design_size]


def stalled(rules: Rules, snap: Snapshot) -> bool:
    """Whether the campaign cannot go on: runs have failed, nothing is out, no refit is coming
    that could rank other points (none queued or running, and none waiting to run again after
    it failed: ``retry_at``), and no point is left to offer (every candidate labeled, failed
    for good, or left out by the failure model for a probability of success below
    ``min_success``: the model's ranking is empty). Only a failure makes a campaign stall;
    ``/next`` then says so (409)."""
    n = snap.n_labeled
    failed = snap.failures or snap.refit.n_failed > 0
    if not failed or n >= rules.max_labels or snap.n_pending > 0 or snap.refit.stopped:
        return False
    taken = _taken(rules, snap)
    if n < rules.design_size:
        return _first_free(design_points(rules, snap), taken | snap.labeled) is None
    if snap.refit.phase != RefitPhase.IDLE or snap.refit.changed or snap.refit.retry_at:
        return False
    version = snap.refit.model_version
    current = version == n if rules.mode == "sequential" else version is not None
    return current and _first_free(snap.ranking, taken) is None


def failing(rules: Rules, n_failed: int, n_forgiven: int = 0) -> bool:
    """Whether the campaign's failed runs, but for those its owner's retries forgave, exceed
    ``max_failures`` (default: ``max_labels``). A failing campaign hands out no point (its
    tickets out can still be labeled) until its owner retries it."""
    return n_failed - n_forgiven > rules.failure_limit


def awaits_refit(rules: Rules, snap: Snapshot) -> bool:
    """Whether the campaign waits for a model that has not seen every label (then whoever
    looks, ``/next`` or a worker's maintenance, checks that its refit is alive)."""
    n = snap.n_labeled
    return rules.design_size <= n < rules.max_labels and snap.refit.model_version != n


def labeled_state(y: float | dict, noise: float | dict | None = None) -> str:
    """A labeled ticket's state: ``labeled:<repr(y)>``, or ``labeled:<repr(y)>:<repr(noise)>``
    for a label with a known noise variance (so that a repeat must match both). With several
    outputs ``y`` (and ``noise``) are objects, written ``{'name': repr, ...}`` with their names
    sorted (a repeat must match every output)."""

    def text(value) -> str:
        if isinstance(value, dict):
            return "{" + ", ".join(f"{k!r}: {float(value[k])!r}" for k in sorted(value)) + "}"
        return repr(float(value))

    state = f"labeled:{text(y)}"
    return state if noise is None else f"{state}:{text(noise)}"


def failed_state(reason: str) -> str:
    """A failed ticket's state: ``failed:`` and a digest of its reason (the reason itself is
    kept once, in the failure's record), so that a repeat must give the same reason."""
    return "failed:" + hashlib.sha256(reason.encode()).hexdigest()[:32]
