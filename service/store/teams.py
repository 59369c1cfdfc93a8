"""Teams and access tokens: a campaign's two tokens, a team's one, and whose a token is."""

from __future__ import annotations

import json
import logging

from fbgp_al.service import queues
from fbgp_al.service.keys import TEAM_DIGESTS, TEAM_GRANT, TEAMS, TOKENS
from fbgp_al.service.store.noun import Noun
from fbgp_al.service.tokens import new_token, token_digest

log = logging.getLogger("fbgp.store")


class TeamFull(Exception):
    """A team holds as many campaigns as it may."""


class TeamGone(Exception):
    """The token that would create a team's campaign is no longer the team's."""


def _team_tenant(name: str, record: dict) -> int:
    """A team's tenant: the one its record was given when it was made, or, for a team made
    before tenants were given, its name's (:func:`service.queues.tenant`)."""
    given = record.get("tenant")
    return queues.tenant(name) if given is None else int(given)


class Teams(Noun):
    """Teams and the access tokens of campaigns and teams."""

    def issue_tokens(self, campaign_id: str) -> tuple[str, str]:
        """The campaign's two access tokens, its simulators' and its owner's, returned once;
        only their digests are kept."""
        simulator, owner = new_token(), new_token()
        digests = token_digest(simulator), token_digest(owner)
        pipe = self.r.pipeline()
        pipe.hset(TOKENS, mapping={digests[0]: campaign_id, digests[1]: f"{campaign_id} owner"})
        pipe.set(self.k(campaign_id, "token"), " ".join(digests))
        pipe.execute()
        return simulator, owner

    def token_grant(self, token: str) -> tuple[str, str] | None:
        """Whose token this is, if any: a campaign and the token's scope (``simulator`` or
        ``owner``), or a team's name and ``team``."""
        grant = self.r.hget(TOKENS, token_digest(token))
        if grant is None:
            return None
        grant = grant.decode()
        if grant.startswith(TEAM_GRANT):
            return grant.removeprefix(TEAM_GRANT), "team"
        campaign_id, _, scope = grant.partition(" ")
        return campaign_id, scope or "simulator"

    def _team_keys(self, name: str) -> list[str]:
        return [TEAMS, TEAM_DIGESTS, TOKENS, self.team_key(name)]

    def create(self, name: str, now: float) -> str | int:
        """A new team's token (returned once, its digest kept); 0 if the name is a live
        team's, -1 if a deleted team's that still holds campaigns."""
        token = new_token()
        record = json.dumps({"created_at": now})
        done = self.s.team_token(
            keys=self._team_keys(name),
            args=[name, token_digest(token), record, "create", queues.TENANTS],
        )
        return token if done == 1 else int(done)

    def rotate_token(self, name: str) -> str | None:
        """A new token for team ``name`` in place of its old one (a deleted team's: it is live
        again), or None if there is no such team."""
        token = new_token()
        done = self.s.team_token(
            keys=self._team_keys(name),
            args=[name, token_digest(token), "", "rotate", queues.TENANTS],
        )
        return token if done else None

    def delete(self, name: str) -> bool:
        """Team ``name``'s token gone, and the team with it unless it holds campaigns (they
        stay); False if there was no live team of that name."""
        return bool(self.s.delete_team(keys=self._team_keys(name), args=[name]))

    def all(self) -> list[dict]:
        """Every team: its name, when it was made, whether its token is live (a deleted team
        that holds campaigns stays, not live), how many campaigns it has, and the tenant its
        campaigns' refits queue under."""
        records = sorted(self.r.hgetall(TEAMS).items())
        live = {n.decode() for n in self.r.hkeys(TEAM_DIGESTS)}
        pipe = self.r.pipeline()
        for name, _ in records:
            pipe.scard(self.team_key(name.decode()))
        counts = pipe.execute()
        out = []
        for (name, raw), count in zip(records, counts, strict=True):
            name, record = name.decode(), json.loads(raw)
            out.append(
                {
                    "name": name,
                    "created_at": record["created_at"],
                    "live": name in live,
                    "n_campaigns": int(count),
                    "tenant": _team_tenant(name, record),
                }
            )
        return out

    def tenant(self, name: str) -> int:
        """The tenant of team ``name``'s refits (:func:`_team_tenant`)."""
        raw = self.r.hget(TEAMS, name)
        return _team_tenant(name, json.loads(raw) if raw else {})

    def has(self, team: str, campaign_id: str) -> bool:
        return bool(self.r.sismember(self.team_key(team), campaign_id))
