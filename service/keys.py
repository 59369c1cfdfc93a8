"""The Redis keys of the service: the one module that spells a ``fbgp:*`` key.

Per campaign ``{id}`` (prefix ``fbgp:c:{id}:``, :func:`campaign`):

- ``spec``: the campaign's JSON body, as created (with ``id``, ``created_at``, the initial
  design's pool indices), but for an explicit pool's points, of which it keeps the count
  (:func:`worker.vocabulary.pools.stored_pool`): they are in ``points``, raw little-endian float64,
  row after row, as codes (:meth:`worker.vocabulary.space.Space.codes`: a value in original units,
  or a choice's value index), so that ``/next`` reads one row and no call parses them all;
- ``state`` (hash): ``refit`` (``idle`` | ``queued`` | ``running``), ``refit_job`` (the id of
  the refit job in charge: the token that fences off every other refit's writes; empty while a
  queued refit waits for its enqueue), ``refit_merge`` (the job that merges a fanned-out refit's
  chain groups), ``queued_at``, ``started_at``, ``heartbeat`` (refreshed while the refit
  runs), ``model_version``, ``last_error``, ``last_refit_seconds``, ``failed_refit_seconds``
  (the longest a refit that failed since the last model ran), ``changes`` (runs failed
  or abandoned so far),
  ``changes_seen`` (``changes`` when the refit in charge started: a refit that ends with more
  runs one more, so that its ranking leaves out points failed since), ``n_failed`` and
  ``n_abandoned`` (every failed and abandoned run, counted),
  ``refit_failures`` (refits failed in a row since the last model: an error, or a job that
  died), ``retry_at`` (when a failed refit runs again: its back-off), ``failed`` (why the
  campaign failed: too many refits failed in a row; empty otherwise), ``stopped`` (the JSON of
  the stopping rule's verdict once it stopped the campaign, :func:`service.stopping.stop_verdict`;
  empty otherwise);
- ``jobs`` (sorted set): the campaign's RQ jobs (``refit:<id>`` for refits, chain groups and
  merges, ``short:<id>`` for predictions and the like), by when they may be forgotten: those
  that a delete or a failure stops;
- ``labels`` (list, append-only): one JSON record per label ``{x, y, index, ticket}`` (and
  ``noise``, its known noise variance, in a campaign with known noise); its length
  is the number of labels;
- ``labeled`` (set): pool indices that have a label;
- ``tickets`` (hash): ticket -> JSON ``{x, index, issued_at, expires_at, model_version}``,
  written once (``expires_at`` as issued; a renewal moves only the lease); ``ticket_state``
  (hash): ticket -> ``pending``, ``labeled:<y>`` (``labeled:<y>:<noise>`` with a known
  noise), ``failed:<digest of its reason>`` (:func:`service.loop.failed_state`),
  ``abandoned`` or ``superseded`` (its label came after its point's, without repeats: it can
  never be labeled);
- ``leases`` (sorted set): tickets out now, by expiry; an expired one leaves the set (its point
  is offered again) but may still be labeled while its point has no label; a failed,
  abandoned or superseded one leaves it at once; ``expired`` (sorted set): tickets whose lease
  ran out, by expiry, and tickets that failed, were abandoned or superseded, by when, kept
  ``expired_ticket_seconds`` (and at most the latest ``keep_ended_tickets`` of them) and then,
  unless labeled, pruned from ``tickets`` and ``ticket_state`` (``expire.lua``); ``requests``
  (hash): a
  ``/next``'s ``Idempotency-Key`` -> the ticket it was answered with, so that the request
  sent again gets the same ticket while that is out (``claim.lua``); entries whose
  ticket is no longer out are pruned as the hash grows; ``imports`` (hash): an import's
  ``Idempotency-Key`` -> the SHA-256 of its observations, the labels stored after it and
  their count, so that the import sent again is not stored twice (at most one per import
  stored: bounded by ``max_labels``);
- ``failures`` (list): one JSON record per failed run ``{x, index, ticket, reason, at}``, the
  latest ``keep_runs`` (``keep_run.lua``; ``n_failed`` counts them all); ``abandons`` (list):
  the latest ``keep_runs`` abandoned runs' ``run_abandoned`` events. The refit never reads
  them: a failed run is no label. ``failed`` (hash): pool index -> its failed runs (more than
  ``max_retries``: not offered again);
- ``model`` (string): the latest model's JSON; ``ranking`` (string): the pool points it ranks
  best, best first, and the points off the pool its search reached (``search.polish``:
  ``{index: null, point, x, score}``, :mod:`worker.fitting.search`); ``offered`` (set): the
  keys of the points off the pool handed out (each once); ``history`` (list): one JSON line
  per model version stored (version, time, refit seconds, R-hat, ESS, divergences, its
  ``accuracy``), refit failed, campaign stopped by its rule (``stopped``) or resumed by its
  owner (``resumed``), the latest ``keep_history``
  (``keep_event.lua``; a store from before ``evaluations`` holds its evaluations here too);
  ``evaluations`` (list): one JSON line per ``/evaluate``, the latest ``keep_evaluations``;
  ``/history`` adds the runs kept (``run_failed``, ``run_abandoned``;
  :meth:`service.store.history.History.events`).

- ``plots`` (hash): ``{kind}:{output}`` -> the stamp it was drawn at (:meth:`service.store.plots.
  Plots.stamp`), a newline, and the page's PNG, so that a picture is drawn once per change of
  the campaign however many pages show it;

- ``lock``: the lock that serializes the choice of points across API processes
  (:meth:`service.store.campaigns.Campaigns.lock`; it expires by itself);

- ``token``: the SHA-256 of the campaign's simulator token, then a space and the SHA-256 of its
  owner token (the tokens themselves are not stored).

``fbgp:campaigns`` (set) holds every campaign id; ``fbgp:tokens`` (hash) maps each campaign
token's SHA-256 to the campaign (a simulator token) or to the campaign, a space and ``owner``
(an owner token), and each team token's to ``team:<name>``; ``fbgp:teams`` (hash) maps each
team's name to the JSON ``{created_at}``, ``fbgp:teams:digest`` (hash) each live team's name to
its one token's SHA-256 (a rotation replaces it; a delete removes it, and the team's record too
unless it holds campaigns), and ``fbgp:team:{name}:campaigns`` (set) holds the ids of the
campaigns its token created (kept when the team is deleted: a rotation of the deleted team's
token opens them again, and its name cannot be made anew while it holds any);
``fbgp:metrics:campaigns`` (hash) counts the campaigns in each phase (``design``, ``active``,
``done``, ``failed``). A label is acknowledged only after the Lua
script that checks its ticket and appends it has run, so a label is stored exactly once.

Shared counters (:mod:`service.observability`): ``fbgp:metrics:labels`` (labels stored),
``fbgp:metrics:runs`` (hash: ``failed``, ``abandoned`` -> runs reported so) and
``fbgp:metrics:refit_seconds`` (hash: a histogram's buckets, sum and count). A fanned-out
refit's chain groups (:mod:`service.jobs.fanout`): ``fbgp:chain-groups:{token}`` (hash: their notes)
and ``fbgp:chain-groups:{token}:draws`` (hash: their draws). A refit's scoring shared in parts
(:func:`service.jobs.share_scoring`): ``fbgp:scoring:{id}`` (hash: ``scoring``, the
JSON of :class:`worker.scoring.Scoring`, and ``candidates:{start}``, the JSON of each part's
candidates, :func:`worker.scoring.pack`), which the part jobs read; it expires by itself.
"""

PREFIX = "fbgp:"
CAMPAIGN_PREFIX = PREFIX + "c:"  # then the campaign's id, a colon and the part
# the pub/sub channel on which a campaign's id is published whenever something changes what its
# /next may answer (a label, an import, a failed or abandoned run, a model, a refit's end)
WAKE_CHANNEL = PREFIX + "wake"
SHORTS = PREFIX + "shorts"  # sorted set: the stack's model calls out -> when they time out
CAMPAIGNS = PREFIX + "campaigns"
TOKENS = PREFIX + "tokens"
TEAMS = PREFIX + "teams"
TEAM_DIGESTS = PREFIX + "teams:digest"  # hash: a live team's name -> its token's SHA-256
TEAM_GRANT = "team:"  # the start of a team token's entry in TOKENS, before the team's name
PHASES = PREFIX + "metrics:campaigns"  # hash: design, active, done, failed -> campaigns so
LABELS_METRIC = PREFIX + "metrics:labels"
RUNS_METRIC = PREFIX + "metrics:runs"  # hash: failed, abandoned -> tickets reported so
REFIT_METRIC = PREFIX + "metrics:refit_seconds"  # hash: bucket upper bounds -> counts, sum, count
# every key of a campaign that its delete removes, as the docstring lists them
PARTS = (
    "spec",
    "points",
    "state",
    "labels",
    "labeled",
    "tickets",
    "ticket_state",
    "leases",
    "failures",
    "failed",
    "model",
    "ranking",
    "history",
    "token",
    "jobs",
    "expired",
    "requests",
    "plots",
    "imports",
    "abandons",
    "evaluations",
    "offered",
)


def campaign(campaign_id: str, part: str) -> str:
    """Key ``part`` of campaign ``campaign_id`` (one of :data:`PARTS`, or ``lock``)."""
    return f"{CAMPAIGN_PREFIX}{campaign_id}:{part}"


def campaign_keys(campaign_id: str) -> str:
    """The pattern (``SCAN MATCH``) of every key of campaign ``campaign_id``."""
    return campaign(campaign_id, "*")


def team(name: str) -> str:
    """The set of the campaigns team ``name``'s token created."""
    return f"{PREFIX}team:{name}:campaigns"


def chain_groups(token: str) -> tuple[str, str]:
    """The keys of refit ``token``'s chain groups: their notes, and their draws."""
    key = f"{PREFIX}chain-groups:{token}"
    return key, f"{key}:draws"


def scoring(scoring_id: str) -> str:
    """The key of a refit's scoring shared in parts (its :class:`worker.scoring.Scoring` and
    each part's candidates)."""
    return f"{PREFIX}scoring:{scoring_id}"
