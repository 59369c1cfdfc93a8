"""The labeling loop's rules, as pure functions of a campaign's snapshot: what ``/next`` answers,
when a refit is due, when one is dead, and what a label's outcome is.

No Redis, no FastAPI, no torch: the store reads a :class:`Snapshot` (one MULTI/EXEC) and the
routes and the workers act on the decisions. The Lua scripts in :mod:`service.store` stay the
ones that write, atomically; they apply the same rules as :func:`label_outcome`,
:func:`refit_due` and :func:`refit_again` (``tests/service/test_loop_store.py`` replays random
operations against both and checks that they agree).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

# hints for a client that must wait (Retry-After, seconds)
FULL_RETRY_SECONDS = 5.0  # every label that max_labels allows is stored or out
DESIGN_RETRY_SECONDS = 1.0  # the initial design is all out
REFIT_RETRY_BOUNDS = (1.0, 30.0)  # about one refit's duration, within these bounds
# a queued refit is given this long for its enqueue (after the label's script) to arrive
ENQUEUE_GRACE_SECONDS = 2.0
# a running refit whose heartbeat has been silent this long is dead if its job failed
SILENT_SECONDS = 3.0


class Phase(StrEnum):
    """A campaign's state in its status."""

    DESIGN = "design"  # the initial design is being labeled
    ACTIVE = "active"  # a model chooses the points
    DONE = "done"  # max_labels labels are stored


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


class ImportOutcome(StrEnum):
    STORED = "stored"
    TOO_MANY = "too_many"  # the observations would exceed max_labels: none is stored


@dataclass(frozen=True)
class Rules:
    """The parts of a campaign's spec that the loop's rules read."""

    max_labels: int
    design_index: tuple[int, ...]  # the initial design's pool indices, in order
    mode: str  # "sequential" | "parallel"
    max_pending: int
    allow_repeats: bool

    @property
    def design_size(self) -> int:
        return len(self.design_index)

    @classmethod
    def of(cls, spec: dict) -> Rules:
        return cls(
            max_labels=int(spec["max_labels"]), design_index=tuple(spec["design_index"]),
            mode=spec.get("mode", "sequential"), max_pending=int(spec.get("max_pending", 1)),
            allow_repeats=bool(spec.get("allow_repeats", False)),
        )  # fmt: skip


@dataclass(frozen=True)
class Refit:
    """A campaign's refit state (the store's ``state`` hash)."""

    phase: RefitPhase = RefitPhase.IDLE
    job: str = ""  # the id of the refit job in charge (its fencing token)
    queued_at: float = 0.0
    started_at: float = 0.0
    heartbeat: float = 0.0
    model_version: int | None = None  # the labels the latest model saw
    last_refit_seconds: float | None = None
    last_error: str | None = None

    @classmethod
    def of(cls, state: dict) -> Refit:
        def number(key: str) -> float:
            return float(state.get(key) or 0.0)

        version, seconds = state.get("model_version"), state.get("last_refit_seconds")
        return cls(
            phase=RefitPhase(state.get("refit") or "idle"), job=state.get("refit_job") or "",
            queued_at=number("queued_at"), started_at=number("started_at"),
            heartbeat=number("heartbeat"),
            model_version=int(version) if version not in (None, "") else None,
            last_refit_seconds=float(seconds) if seconds else None,
            last_error=state.get("last_error") or None,
        )  # fmt: skip


@dataclass(frozen=True)
class Snapshot:
    """A campaign's labeling state at one instant (:meth:`service.store.CampaignStore.snapshot`)."""

    n_labeled: int
    n_pending: int  # tickets out under a live lease
    pending: frozenset[int]  # their pool indices
    labeled: frozenset[int]  # pool indices that have a label
    refit: Refit
    ranking: tuple[int, ...] = ()  # the latest model's pool indices, in the order to hand out


@dataclass(frozen=True)
class Offer:
    """Hand out pool point ``index``, chosen by model ``version`` (None: the initial design)."""

    index: int
    version: int | None


@dataclass(frozen=True)
class Wait:
    """No point can be given yet; ask again in about ``seconds``."""

    seconds: float


@dataclass(frozen=True)
class Done:
    """The campaign has max_labels labels."""


Answer = Offer | Wait | Done


def phase(rules: Rules, n_labeled: int) -> Phase:
    if n_labeled >= rules.max_labels:
        return Phase.DONE
    return Phase.DESIGN if n_labeled < rules.design_size else Phase.ACTIVE


def next_answer(rules: Rules, snap: Snapshot) -> Answer:
    """What ``/next`` answers. The initial design's points may all be out at once; after it,
    ``sequential`` hands out a point only from a model that saw every label and with none out,
    ``parallel`` up to ``max_pending`` at once from any model. Never a point that is out under a
    live lease, never one with a label (unless repeats are allowed), never more tickets out
    than ``max_labels`` minus the labels stored."""
    n = snap.n_labeled
    if n >= rules.max_labels:
        return Done()
    if n + snap.n_pending >= rules.max_labels:
        return Wait(FULL_RETRY_SECONDS)
    taken = snap.pending if rules.allow_repeats else snap.pending | snap.labeled
    if n < rules.design_size:
        index = _first_free(rules.design_index, taken)
        return Wait(DESIGN_RETRY_SECONDS) if index is None else Offer(index, None)
    version = snap.refit.model_version
    low, high = REFIT_RETRY_BOUNDS
    wait = Wait(max(low, min(high, snap.refit.last_refit_seconds or low)))
    if rules.mode == "sequential" and (version != n or snap.n_pending > 0):
        return wait
    if rules.mode == "parallel" and (version is None or snap.n_pending >= rules.max_pending):
        return wait
    index = _first_free(snap.ranking, taken)
    return wait if index is None else Offer(index, version)


def _first_free(indices: Sequence[int], taken: frozenset[int]) -> int | None:
    return next((i for i in indices if i not in taken), None)


def awaits_refit(rules: Rules, snap: Snapshot) -> bool:
    """Whether the campaign waits for a model that has not seen every label (then whoever
    looks, ``/next`` or a worker's maintenance, checks that its refit is alive)."""
    n = snap.n_labeled
    return rules.design_size <= n < rules.max_labels and snap.refit.model_version != n


def label_outcome(
    rules: Rules, ticket_state: str | None, y: float, n_labeled: int, point_labeled: bool
) -> LabelOutcome:
    """The outcome of posting ``y`` for a ticket in ``ticket_state`` (None: no such ticket;
    ``pending``; ``labeled:<repr(y)>``), ``point_labeled``: its pool point has a label already.
    A ticket whose lease expired is still ``pending``: its label is taken while its point has
    none. The store's LABEL_SCRIPT applies this rule atomically."""
    if ticket_state is None:
        return LabelOutcome.UNKNOWN_TICKET
    if ticket_state != "pending":
        same = ticket_state == f"labeled:{float(y)!r}"
        return LabelOutcome.SAME_AGAIN if same else LabelOutcome.CONFLICT
    if point_labeled and not rules.allow_repeats:
        return LabelOutcome.CONFLICT
    if n_labeled >= rules.max_labels:
        return LabelOutcome.DONE
    return LabelOutcome.STORED


def import_outcome(rules: Rules, n_labeled: int, count: int) -> ImportOutcome:
    """Imported observations are stored all or none (the store's IMPORT_SCRIPT)."""
    too_many = n_labeled + count > rules.max_labels
    return ImportOutcome.TOO_MANY if too_many else ImportOutcome.STORED


def refit_due(rules: Rules, n_labeled: int, refit: RefitPhase) -> bool:
    """After labels were stored: a refit is queued once the design is labeled, unless one is
    queued or running already (that one runs again at its end, :func:`refit_again`)."""
    return n_labeled >= rules.design_size and refit == RefitPhase.IDLE


def refit_again(n_labeled: int, n_seen: int) -> bool:
    """At a refit's end: one more refit runs if labels arrived after it read them."""
    return n_labeled > n_seen


@dataclass(frozen=True)
class JobFacts:
    """What RQ says about a refit's job (:func:`service.queues.job_facts`)."""

    alive: bool  # waiting in its queue, on its way to a work horse, or on a beating worker
    failed: bool  # ended without success


def refit_suspect(refit: Refit, now: float, lease: float) -> bool:
    """Whether the clock alone cannot tell that the refit is alive: then :func:`refit_dead`
    needs its job's facts (looked up only for suspects, since that costs Redis calls)."""
    if refit.phase == RefitPhase.RUNNING:
        return _silent(refit, now) > min(SILENT_SECONDS, lease)
    if refit.phase == RefitPhase.QUEUED:
        return now - refit.queued_at >= ENQUEUE_GRACE_SECONDS
    return False


def refit_dead(refit: Refit, now: float, lease: float, job: JobFacts) -> bool:
    """Whether the refit a campaign waits for will never end by itself: a running one whose
    heartbeat is older than ``lease`` seconds (its worker died), or whose heartbeat stopped and
    whose job failed (its work horse was killed); a queued one whose job is gone (failed,
    deleted, or taken by a worker that no longer exists)."""
    if not refit_suspect(refit, now, lease):
        return False
    if refit.phase == RefitPhase.RUNNING:
        silent = _silent(refit, now)
        return silent > lease or (silent > SILENT_SECONDS and job.failed)
    return not (refit.job and job.alive)


def _silent(refit: Refit, now: float) -> float:
    return now - (refit.heartbeat or refit.started_at)
