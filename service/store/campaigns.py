"""A campaign's spec, its pool, its state hash and its delete; the index of campaigns and
their count by phase; the wake-ups of ``/next``'s long polls and the lock on its choice of
points."""

from __future__ import annotations

import bisect
import functools
import json
import logging
import time
import uuid

import numpy as np
from redis.exceptions import WatchError

from fbgp_al.service import loop, queues
from fbgp_al.service.keys import (
    CAMPAIGNS,
    PARTS,
    PHASES,
    PREFIX,
    TEAM_DIGESTS,
    TOKENS,
)
from fbgp_al.service.loop import Rules
from fbgp_al.service.refusals import NotFound
from fbgp_al.service.store.noun import Noun
from fbgp_al.service.store.pollers import Pollers
from fbgp_al.service.store.teams import TeamFull, TeamGone, Teams
from fbgp_al.worker.vocabulary import fidelities, pools
from fbgp_al.worker.vocabulary.design import initial_design

log = logging.getLogger("fbgp.store")
RESERVE_SIZE = 32  # pool points set aside to stand in for design points that fail, at most
ROW_TYPE = np.dtype("<f8")  # an explicit pool's stored coordinates


def design_reserve(pool, design: list[int], seed: int) -> list[int]:
    """Pool indices, in a seeded random order, that stand in for design points failed for good
    (:func:`service.loop.design_points`): up to ``RESERVE_SIZE``, none of the design's."""
    size = min(RESERVE_SIZE, pool.size - len(design))
    rng = np.random.default_rng([int(seed), 1])
    reserve = pool.subsample(size, rng, exclude=design)
    return [int(i) for i in rng.permutation(reserve)]


def _design(spec: dict, pool) -> np.ndarray:
    """The initial design's pool indices: a maximin Latin hypercube; with fidelities, nested
    over the levels (:func:`worker.vocabulary.fidelities.nested_design`)."""
    size, seed, space = spec["initial_design"]["size"], spec["seed"], pools.space_of(spec)
    levels = fidelities.levels(spec)
    if levels:
        return fidelities.nested_design(pool, space, size, len(levels), seed)
    return initial_design(pool, size, seed, warp=space.stratify)


class Campaigns(Noun):
    """A campaign's spec, pool, state and delete, and the index of campaigns."""

    teams: Teams
    pollers: Pollers

    def create(self, body: dict, team: tuple[str, str] | None = None, team_limit: int = 0) -> dict:
        """The campaign of ``body``, stored; with ``team`` (its name and its token's SHA-256:
        the token that creates it), the team's, all in one transaction with the check that
        the token is still the team's (:class:`TeamGone` if it was rotated or deleted
        meanwhile) and holds fewer than ``team_limit`` campaigns (:class:`TeamFull`)."""
        campaign_id = uuid.uuid4().hex[:16]
        name = None if team is None else team[0]
        if name is not None and self.r.scard(self.team_key(name)) >= team_limit:
            raise TeamFull(name)  # before the design's work; checked again below
        tenant = 0 if name is None else self.teams.tenant(name)
        spec = dict(body, id=campaign_id, created_at=time.time(), team=name, tenant=tenant)
        spec = pools.with_box_design(spec, RESERVE_SIZE)
        pool = pools.pool_of(spec)
        size = spec["initial_design"]["size"]
        if spec["pool"]["type"] == "continuous":  # its stored points: the design, the reserve
            spec["design_index"] = list(range(size))
            spec["design_reserve"] = list(range(size, pool.size))
        else:
            design = _design(spec, pool)
            spec["design_index"] = [int(i) for i in design]
            spec["design_reserve"] = design_reserve(pool, spec["design_index"], spec["seed"])
        stored = json.dumps(dict(spec, pool=pools.stored_pool(spec["pool"])))
        points = None
        if pools.explicit(spec):
            points = pools.space_of(spec).codes(spec["pool"]["points"]).astype(ROW_TYPE)
        with self.r.pipeline() as pipe:
            while True:
                try:
                    if team is not None:
                        self._check_team(pipe, team, team_limit)
                    pipe.multi()
                    pipe.set(self.k(campaign_id, "spec"), stored)
                    if points is not None:
                        pipe.set(self.k(campaign_id, "points"), points.tobytes())
                    pipe.hset(self.k(campaign_id, "state"), mapping={"refit": "idle"})
                    pipe.sadd(CAMPAIGNS, campaign_id)
                    if name is not None:
                        pipe.sadd(self.team_key(name), campaign_id)
                    phase = str(loop.phase(Rules.of(spec), 0))
                    self.s.count_created(keys=[PHASES], args=[phase], client=pipe)
                    pipe.execute()
                    return dict(spec, pool=body["pool"])  # a continuous pool's as posted
                except WatchError:  # the team changed between the check and the writes
                    continue

    def _check_team(self, pipe, team: tuple[str, str], limit: int) -> None:
        """Watches the team's token and set on ``pipe`` and checks them (see :meth:`create`)."""
        name, digest = team
        pipe.watch(TEAM_DIGESTS, self.team_key(name))
        held = pipe.hget(TEAM_DIGESTS, name)
        if held is None or held.decode() != digest:
            raise TeamGone(name)
        if pipe.scard(self.team_key(name)) >= limit:
            raise TeamFull(name)

    def spec(self, campaign_id: str) -> dict:
        raw = self.r.get(self.k(campaign_id, "spec"))
        if raw is None:
            raise NotFound(f"no campaign {campaign_id!r}")
        return json.loads(raw)

    def points(self, campaign_id: str, spec: dict) -> np.ndarray | None:
        """An explicit pool's points (``m x d`` codes, :meth:`worker.vocabulary.space.Space.codes`:
        for float inputs, their values); None for a grid or a pool kept in the spec itself (as
        campaigns created before the points were kept apart)."""
        if not pools.explicit(spec) or "points" in spec["pool"]:
            return None
        raw = self.r.get(self.k(campaign_id, "points"))
        if raw is None:
            raise NotFound(f"no campaign {campaign_id!r}")
        return np.frombuffer(raw, dtype=ROW_TYPE).reshape(-1, len(spec["inputs"]))

    def pool(self, campaign_id: str, spec: dict):
        """The campaign's pool in the unit cube (:func:`worker.vocabulary.pools.pool_of`)."""
        return pools.pool_of(spec, self.points(campaign_id, spec))

    def pool_points(self, campaign_id: str, spec: dict, indices: list[int]) -> list[list]:
        """Pool points ``indices`` as values: of an explicit pool, their stored rows (one
        ``GETRANGE`` each, in one round trip, whatever the pool's size), exactly as posted."""
        if not pools.explicit(spec):  # the grid built once for all of them
            return pools.to_original(spec, pools.pool_of(spec).points(indices))
        if "points" in spec["pool"]:
            return [[float(v) for v in spec["pool"]["points"][i]] for i in indices]
        width = ROW_TYPE.itemsize * len(spec["inputs"])
        pipe = self.r.pipeline(transaction=False)
        for i in indices:
            pipe.getrange(self.k(campaign_id, "points"), i * width, (i + 1) * width - 1)
        rows = pipe.execute()
        if any(len(raw) != width for raw in rows):
            raise NotFound(f"no campaign {campaign_id!r}")
        codes = np.array([np.frombuffer(raw, dtype=ROW_TYPE) for raw in rows])
        return pools.space_of(spec).values(codes.reshape(len(rows), len(spec["inputs"])))

    def delete(self, campaign_id: str) -> None:
        """All the campaign's keys, its id and its token, at once (``delete.lua``);
        then its jobs are stopped (running) or canceled (queued)."""
        spec = self.spec(campaign_id)
        part = functools.partial(self.k, campaign_id)
        keys = [
            part("spec"),
            part("labels"),
            part("token"),
            CAMPAIGNS,
            TOKENS,
            PHASES,
            part("state"),
            part("jobs"),
            self.team_key(spec.get("team") or ""),
        ]
        args = [campaign_id, spec["initial_design"]["size"], spec["max_labels"]]
        found, *jobs = self.s.delete(keys=keys + [part(p) for p in PARTS], args=args)
        if not found:
            raise NotFound(f"no campaign {campaign_id!r}")
        self.pollers.wake(campaign_id)
        queues.stop_jobs(self.r, [j.decode().partition(":")[2] for j in jobs])

    def state(self, campaign_id: str) -> dict:
        raw = self.r.hgetall(self.k(campaign_id, "state"))
        return {k.decode(): v.decode() for k, v in raw.items()}

    def n_labeled(self, campaign_id: str) -> int:
        return int(self.r.llen(self.k(campaign_id, "labels")))

    def ids(self, team: str | None = None) -> list[str]:
        """Every campaign's id, in order; with ``team``, that team's only."""
        members = self.r.smembers(CAMPAIGNS if team is None else self.team_key(team))
        return sorted(i.decode() for i in members)

    def ids_page(
        self, cursor: str | None, limit: int | None, team: str | None = None
    ) -> tuple[list[str], str | None]:
        """The campaign ids (with ``team``, that team's only) after ``cursor`` (an id; None:
        from the first), in order, at most ``limit`` of them (None: all), and the cursor of the
        next page (None: this is the last). Only the page's campaigns are read further by the
        callers."""
        ids = self.ids(team)
        if cursor is not None:
            ids = ids[bisect.bisect_right(ids, cursor) :]
        if limit is None or len(ids) <= limit:
            return ids, None
        return ids[:limit], ids[limit - 1]

    def count_by_phase(self) -> dict[str, int]:
        """How many campaigns are in each phase (:func:`service.loop.phase`), as the scripts
        that add labels keep count; counted once from every campaign (``rebuild_phases.lua``)
        where no count is kept yet (a new store, or one written before the count existed)."""
        if not self.r.exists(PHASES):
            self.s.rebuild_phases(keys=[PHASES, CAMPAIGNS], args=[f"{PREFIX}c:"])
        counts = {k.decode(): int(v) for k, v in self.r.hgetall(PHASES).items()}
        return {str(p): counts.get(str(p), 0) for p in loop.Phase}

    def lock(self, campaign_id: str, timeout: float = 10.0):
        """Serializes the choice of points for one campaign across API processes: held at
        most ``timeout`` seconds, waited for at most as long."""
        return self.r.lock(self.k(campaign_id, "lock"), timeout=timeout, blocking_timeout=timeout)
