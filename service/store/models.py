"""Models and the stopping rule: a refit's model stored and the campaign stopped by its rule
in one step (``save_model.lua``), the owner's resume (``resume.lua``), evaluations
(``add_evaluation.lua``); each kind of event keeps its latest (``keep_event.lua``)."""

from __future__ import annotations

import json
import logging
import time
from typing import NamedTuple

from fbgp_al.service import loop, stopping
from fbgp_al.service.keys import PHASES
from fbgp_al.service.refusals import NotFound
from fbgp_al.service.settings import get_settings
from fbgp_al.service.store.campaigns import Campaigns
from fbgp_al.service.store.counters import Counters
from fbgp_al.service.store.history import History
from fbgp_al.service.store.jobs import Jobs, Workforce
from fbgp_al.service.store.noun import Noun
from fbgp_al.service.store.pollers import Pollers
from fbgp_al.service.store.runs import Runs
from fbgp_al.service.store.tickets import Tickets
from fbgp_al.worker.vocabulary.defaults import STOP_TARGETS, failure_options
from fbgp_al.worker.vocabulary.design import GridPool, PointPool

log = logging.getLogger("fbgp.store")


class Candidates(NamedTuple):
    """What a refit ranks (:meth:`Models.candidates`), and the workers if asked."""

    pool: GridPool | PointPool
    exclude: set[int]
    pending: list[int]
    failures: list[dict]
    workforce: Workforce | None = None
    labeled: frozenset[int] = frozenset()  # pool points labeled, those of runs since included
    pending_x: list[list] = []  # the values of the points off the pool out


class Models(Noun):
    """Models, evaluations, and the stopping rule's stop and the owner's resume."""

    campaigns: Campaigns
    jobs: Jobs
    tickets: Tickets
    runs: Runs
    history: History
    pollers: Pollers
    counters: Counters

    def candidates(
        self, campaign_id: str, spec: dict, now: float, workforce: bool = False
    ) -> Candidates:
        """What a refit ranks, as of ``now`` (:class:`Candidates`): the pool
        (:func:`worker.vocabulary.pools.pool_of`), the indices never to offer again (labeled, unless
        the campaign allows repeats, and failed for good: :func:`service.loop.failed_for_good`), the
        points out now (for the batch's pending points), and the failed runs its failure model
        counts (:meth:`service.store.runs.Runs.counted_failures`), those that failed while the
        posterior was sampled included; with ``workforce``, the workers as they are now, for its
        scoring to take idle ones (:meth:`service.store.jobs.Jobs.workforce`)."""
        snap = self.tickets.snapshot(campaign_id, now)
        exclude = set(loop.never_offered(spec, snap))
        with_model = failure_options(spec)[0] != "none"
        failures = self.runs.counted_failures(campaign_id) if with_model else []
        pool = self.campaigns.pool(campaign_id, spec)
        workers = self.jobs.workforce(now) if workforce else None
        pending = sorted(i for i in snap.pending if not isinstance(i, str))
        return Candidates(
            pool, exclude, pending, failures, workers, snap.labeled, list(snap.pending_x)
        )

    def save(self, campaign_id: str, model: dict, ranking: list[dict], token: str) -> bool:
        """Store the model of refit ``token`` unless another refit is in charge now or a newer
        model is there already, and count its time in the shared metric; True if stored."""
        d = model["diagnostics"]
        event = {"event": "model", "version": model["version"], "at": time.time()}
        for key in ("refit_seconds", "max_rhat", "min_ess_bulk", "divergences", "started_at"):
            event[key] = d.get(key)
        if "accuracy" in model:
            event["accuracy"] = model["accuracy"]
        # several outputs: each one's estimates a stopping rule may name, in its own units (the
        # page's learning curves)
        each = {
            name: {k: o["accuracy"][k] for k in STOP_TARGETS if k in o["accuracy"]}
            for name, o in (model.get("outputs") or {}).items()
            if o.get("accuracy")
        }
        if each:
            event["outputs"] = each
        keys = [self.k(campaign_id, p) for p in ("state", "history", "model", "ranking")]
        keys += [self.k(campaign_id, "labels"), PHASES]
        args = [
            token,
            model["version"],
            json.dumps(event),
            json.dumps(model),
            json.dumps(ranking),
            d.get("refit_seconds", 0.0),
        ]
        args += self._stop_args(campaign_id, event)
        args.append(get_settings().keep_history)
        outcome = self.s.save_model(keys=keys, args=args)
        if outcome == 2:
            log.info("campaign stopped by its rule: %s", args[6], extra={"campaign": campaign_id})
        if outcome >= 1:
            self.pollers.wake(campaign_id)
            self.counters.count_refit(d["refit_seconds"])
        return outcome >= 1

    def _stop_args(self, campaign_id: str, event: dict) -> list:
        """``save_model.lua``'s stop (its verdict, its history event, the design's size and
        max_labels) if the campaign's stopping rule is met once model ``event`` is in its
        history (:func:`service.stopping.stop_verdict`); blanks if not. The rule and the history
        read here cannot change before the script runs unless the campaign is stopped (only a
        resume changes them), and then the script does not stop it again."""
        try:
            spec = self.campaigns.spec(campaign_id)
        except NotFound:
            return ["", "", 0, 0]  # deleted meanwhile: the script finds no refit in charge
        if not spec.get("stop"):
            return ["", "", 0, 0]
        history = [*self.history.read(campaign_id, evaluations=False), event]
        verdict = stopping.stop_verdict(
            spec["stop"], history, spec["initial_design"]["size"], STOP_TARGETS
        )
        if verdict is None or verdict["version"] != event["version"]:
            return ["", "", 0, 0]
        verdict["at"] = event["at"]
        stopped = dict(verdict, event="stopped", n_labeled=event["version"])
        return [
            json.dumps(verdict),
            json.dumps(stopped),
            spec["initial_design"]["size"],
            spec["max_labels"],
        ]

    def latest(self, campaign_id: str) -> dict:
        raw = self.r.get(self.k(campaign_id, "model"))
        if raw is None:
            self.campaigns.spec(campaign_id)
            raise NotFound(f"campaign {campaign_id!r} has no model yet")
        return json.loads(raw)

    def ranking(self, campaign_id: str) -> list[dict]:
        raw = self.r.get(self.k(campaign_id, "ranking"))
        return [] if raw is None else json.loads(raw)

    def record_evaluation(self, campaign_id: str, version: int, metrics: dict) -> None:
        """Keep an ``/evaluate``'s metrics as an ``evaluate`` event (the latest
        ``keep_evaluations`` of them), unless the campaign was deleted meanwhile."""
        event = {"event": "evaluate", "version": version, "n_labeled": version, "at": time.time()}
        kept = ("nlml", "rmse", "nlpd_mixture", "nlml_paper", "nlml_y", "nlpd_mixture_y")
        if "outputs" in metrics:  # several outputs: each one's, and their mean in GP units
            event["outputs"] = {
                name: {k: m[k] for k in kept if k in m} for name, m in metrics["outputs"].items()
            }
            for k in ("nlml", "nlpd_mixture", "nlml_paper"):
                values = [m[k] for m in event["outputs"].values() if k in m]
                if len(values) == len(event["outputs"]):
                    event[k] = sum(values) / len(values)
        else:
            event.update({k: metrics[k] for k in kept if k in metrics})
        keys = [self.k(campaign_id, "spec"), self.k(campaign_id, "evaluations")]
        self.s.add_evaluation(keys=keys, args=[json.dumps(event), get_settings().keep_evaluations])

    def resume(self, campaign_id: str, stop: dict | None = None, replace: bool = False) -> bool:
        """The owner's resume of a campaign its stopping rule stopped: it goes on, the rule's
        patience counted again from the next model; with ``replace``, under rule ``stop``
        (None: none). False if it was not stopped."""
        for _ in range(10):
            raw = self.r.get(self.k(campaign_id, "spec"))
            if raw is None:
                raise NotFound(f"no campaign {campaign_id!r}")
            spec = json.loads(raw)
            new = json.dumps(dict(spec, stop=stop)) if replace else ""
            event = {
                "event": "resumed",
                "at": time.time(),
                "n_labeled": self.campaigns.n_labeled(campaign_id),
                "stop": stop if replace else spec.get("stop"),
            }
            keys = [self.k(campaign_id, p) for p in ("state", "labels")] + [PHASES]
            keys += [self.k(campaign_id, "history"), self.k(campaign_id, "spec")]
            args = [
                json.dumps(event),
                spec["initial_design"]["size"],
                spec["max_labels"],
                raw,
                new,
                get_settings().keep_history,
            ]
            outcome = int(self.s.resume(keys=keys, args=args))
            if outcome >= 0:
                self.pollers.wake(campaign_id)
                return bool(outcome)
        raise RuntimeError("the campaign's spec kept changing during its resume")
