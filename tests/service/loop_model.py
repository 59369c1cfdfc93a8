"""The labeling loop as a small pure state machine (python-adaptive's ask/tell in spirit): the
campaign's labels, tickets and refit, driven by :mod:`service.loop`'s rules alone. The property
tests run it without Redis; the replay test runs the same operations against the real store and
checks that both agree on every outcome."""

from __future__ import annotations

from dataclasses import dataclass, field

from hypothesis import strategies as st

from fbgp_al.service import loop
from fbgp_al.service.loop import LabelOutcome, RefitPhase, RenewOutcome, RunOutcome
from fbgp_al.service.store import rules as store_rules

START = 1_000_000.0  # the clock at the start of a run
YS = (0.0, 1.0, 2.5)  # few values, so that a ticket's label comes again, or differs
REASONS = ("boom", "diverged")  # few reasons, so that a failure is reported again, or differs


@dataclass
class Ticket:
    index: int
    expires_at: float
    state: str = "pending"  # or "labeled:<repr(y)>", "failed:<digest>", "abandoned", "superseded"


@dataclass
class LoopModel:
    rules: loop.Rules
    lease_seconds: float
    now: float = START
    labels: list[tuple[int, int, float]] = field(default_factory=list)  # (ticket, index, y)
    labeled: set[int] = field(default_factory=set)
    tickets: list[Ticket] = field(default_factory=list)
    refit: RefitPhase = RefitPhase.IDLE
    seen: int = 0  # the labels the running refit read
    version: int | None = None
    ranking: tuple[int, ...] = ()
    failures: list[tuple[int, int, str]] = field(default_factory=list)  # (ticket, index, reason)
    failed: dict[int, int] = field(default_factory=dict)  # pool index -> failed runs
    abandoned: int = 0
    changes: int = 0  # failures and abandons stored
    changes_seen: int = 0  # ... when the running refit started

    def live(self) -> list[Ticket]:
        """Tickets out under a live lease: unended and not expired."""
        return [t for t in self.tickets if t.state == "pending" and t.expires_at >= self.now]

    def snapshot(self) -> loop.Snapshot:
        live = self.live()
        return loop.Snapshot(
            n_labeled=len(self.labels),
            n_pending=len(live),
            pending=frozenset(t.index for t in live),
            labeled=frozenset(self.labeled),
            refit=loop.Refit(
                phase=self.refit,
                model_version=self.version,
                changes=self.changes,
                changes_seen=self.changes_seen,
                n_failed=len(self.failures),
            ),
            ranking=self.ranking,
            failures=dict(self.failed),
        )

    # -- the operations -------------------------------------------------------------------------
    def next(self) -> loop.Answer:
        """``/next``: a new ticket for an :class:`~service.loop.Offer`."""
        answer = loop.next_answer(self.rules, self.snapshot())
        if isinstance(answer, loop.Offer):
            self.tickets.append(Ticket(answer.index, self.now + self.lease_seconds))
        return answer

    def label(self, ticket: int | None, y: float) -> tuple[LabelOutcome, int, bool]:
        """``/label`` of ticket number ``ticket`` (None, or one not issued: an unknown one)."""
        n = len(self.labels)
        known = ticket is not None and ticket < len(self.tickets)
        t = self.tickets[ticket] if known else None
        point_labeled = t is not None and t.index in self.labeled
        outcome = store_rules.label_outcome(self.rules, t.state if t else None, y, n, point_labeled)
        if outcome == LabelOutcome.CONFLICT and t.state == "pending":
            t.state = loop.SUPERSEDED
        if outcome != LabelOutcome.STORED:
            return outcome, n, False
        t.state = f"labeled:{float(y)!r}"
        self.labels.append((ticket, t.index, y))
        self.labeled.add(t.index)
        due = store_rules.refit_due(self.rules, len(self.labels), self.refit)
        if due:
            self.refit = RefitPhase.QUEUED
        return outcome, len(self.labels), due

    def fail(self, ticket: int | None, reason: str) -> tuple[RunOutcome, int, bool]:
        """``/fail`` of ticket number ``ticket``."""
        t = self._ticket(ticket)
        outcome = store_rules.fail_outcome(t.state if t else None, reason)
        if outcome != RunOutcome.STORED:
            return outcome, len(self.failures), False
        t.state = loop.failed_state(reason)
        self.failures.append((ticket, t.index, reason))
        self.failed[t.index] = self.failed.get(t.index, 0) + 1
        return outcome, len(self.failures), self._changed()

    def abandon(self, ticket: int | None) -> tuple[RunOutcome, int, bool]:
        """``/abandon`` of ticket number ``ticket``."""
        t = self._ticket(ticket)
        outcome = store_rules.abandon_outcome(t.state if t else None)
        if outcome != RunOutcome.STORED:
            return outcome, self.abandoned, False
        t.state = "abandoned"
        self.abandoned += 1
        return outcome, self.abandoned, self._changed()

    def renew(self, ticket: int | None) -> tuple[RenewOutcome, float | None]:
        """``/renew`` of ticket number ``ticket``."""
        t = self._ticket(ticket)
        live = t is not None and t.expires_at >= self.now
        outcome = store_rules.renew_outcome(t.state if t else None, live)
        if outcome == RenewOutcome.RENEWED:
            t.expires_at = self.now + self.lease_seconds
            return outcome, t.expires_at
        return outcome, None

    def _ticket(self, ticket: int | None) -> Ticket | None:
        return self.tickets[ticket] if ticket is not None and ticket < len(self.tickets) else None

    def _changed(self) -> bool:
        """A failure or abandon was stored: a refit is requested (rules.refit_due)."""
        self.changes += 1
        due = store_rules.refit_due(self.rules, len(self.labels), self.refit)
        if due:
            self.refit = RefitPhase.QUEUED
        return due

    def start_refit(self) -> bool:
        """A worker takes the queued refit: it reads the labels there are now."""
        if self.refit != RefitPhase.QUEUED:
            return False
        self.refit, self.seen = RefitPhase.RUNNING, len(self.labels)
        self.changes_seen = self.changes
        return True

    def finish_refit(self, ranking: tuple[int, ...]) -> bool | None:
        """The running refit stores its model (version: the labels it saw) and ends; True if
        one more must run (None: none was running)."""
        if self.refit != RefitPhase.RUNNING:
            return None
        self.version, self.ranking = self.seen, ranking
        changed = self.changes != self.changes_seen
        again = store_rules.refit_again(len(self.labels), self.seen, changed)
        self.refit = RefitPhase.QUEUED if again else RefitPhase.IDLE
        return again

    def tick(self, seconds: float) -> None:
        self.now += seconds


def resolve(ref: int | None, issued: int) -> int | None:
    """The ticket a label operation names: ``ref`` counts back from the latest one issued
    (None, or no ticket yet: one never issued)."""
    return None if ref is None or issued == 0 else issued - 1 - ref % issued


# a ticket re-issued after its lease expired, then both labeled: the late label is stored, the
# new ticket's conflicts (its point has a label now); hypothesis rarely builds this by chance
LATE_LABEL = (
    {
        "mode": "sequential",
        "max_pending": 1,
        "design": 2,
        "max_labels": 5,
        "allow_repeats": False,
        "seed": 0,
    },
    [
        ("next",),
        ("tick", 7.0),
        ("next",),
        ("label", 1, 0.0),
        ("label", 0, 1.0),
        ("label", 0, 1.0),
        ("next",),
        ("label", 0, 2.5),
        ("start",),
        ("finish", (7, 6, 5, 4, 3, 2, 1, 0)),
        ("next",),
    ],
)


def rules_strategy(pool_size: int) -> st.SearchStrategy[dict]:
    """Campaign bodies over a 1-D grid of ``pool_size`` points."""
    return st.fixed_dictionaries(
        {
            "mode": st.sampled_from(["sequential", "parallel"]),
            "max_pending": st.integers(1, 3),
            "design": st.integers(1, 3),
            "max_labels": st.integers(3, pool_size),
            "allow_repeats": st.booleans(),
            "max_retries": st.integers(0, 2),
            "seed": st.integers(0, 5),
        }
    )


def operations(pool_size: int, length: int = 40) -> st.SearchStrategy[list[tuple]]:
    """Random operations: ``("next",)``, ``("label", ref, y)`` (:func:`resolve`), ``("tick", s)``,
    ``("start",)``, ``("finish", ranking)``, ``("fail", ref, reason)``, ``("abandon", ref)``,
    ``("renew", ref)``."""
    ranking = st.permutations(list(range(pool_size))).map(tuple)
    refs = st.sampled_from([None, 0, 0, 0, 1, 1, 2, 3, 5])  # mostly the latest tickets
    label = st.tuples(st.just("label"), refs, st.sampled_from(YS))
    # labels and /next twice as often as the rest
    op = st.one_of(
        st.just(("next",)),
        label,
        st.just(("next",)),
        label,
        st.tuples(st.just("tick"), st.sampled_from([0.5, 2.0, 7.0])),
        st.just(("start",)),
        st.tuples(st.just("finish"), ranking),
        st.tuples(st.just("fail"), refs, st.sampled_from(REASONS)),
        st.tuples(st.just("abandon"), refs),
        st.tuples(st.just("renew"), refs),
    )
    return st.lists(op, min_size=length // 2, max_size=length)


def body(settings: dict, pool_size: int, lease_seconds: float) -> dict:
    return {
        "name": "loop",
        "inputs": [{"name": "x", "lower": 0.0, "upper": 1.0}],
        "pool": {"type": "grid", "points_per_dim": pool_size},
        "initial_design": {"size": settings["design"]},
        "max_labels": max(settings["max_labels"], settings["design"]),
        "mode": settings["mode"],
        "max_pending": settings["max_pending"],
        "allow_repeats": settings["allow_repeats"],
        "seed": settings["seed"],
        "max_retries": settings.get("max_retries", 0),
        "lease_seconds": lease_seconds,
    }
