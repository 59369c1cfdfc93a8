"""Request and response bodies of the HTTP API, one module per noun; importers name the module
that holds a body. Every number a client sends must be finite. Names and defaults come from
:mod:`worker.vocabulary.defaults` (plain Python, no torch).

- :mod:`~service.schemas.fields`: the shared field types and base classes (every module's);
- :mod:`~service.schemas.inputs`: inputs, pools, the initial design, points checked against them;
- :mod:`~service.schemas.outputs`: several named outputs, and the labels' noise;
- :mod:`~service.schemas.mcmc`: the NUTS settings of each refit;
- :mod:`~service.schemas.stop_rule`: the stopping rule, the target met, ``/resume``'s body;
- :mod:`~service.schemas.campaigns`: a campaign as created, as stored, and its status;
- :mod:`~service.schemas.teams`: teams and their tokens;
- :mod:`~service.schemas.labeling`: ``/next``, ``/label``, a run's end, ``/observations``;
- :mod:`~service.schemas.models`: a model, its export, the campaign's history;
- :mod:`~service.schemas.predictions`: predictions, acquisition values, test metrics;
- :mod:`~service.schemas.health`: the health checks' answers;
- :mod:`~service.schemas.problems`: errors as ``application/problem+json``.
"""
