"""The service: the campaign store on Redis, the RQ jobs that run the math on it, and the HTTP
API over the store.

- The store: :mod:`service.store` (one object, :class:`service.store.CampaignStore`, over its
  nouns) and the modules it and the jobs stand on: the key schema (:mod:`service.keys`), the
  queues (:mod:`service.queues`, :mod:`service.costs`, :mod:`service.job_results`), the rules
  of the loop, of a refit's supervision and of stopping (:mod:`service.loop`,
  :mod:`service.supervision`, :mod:`service.stopping`), the settings, the domain's errors,
  team tokens, metrics and logs (:mod:`service.observability`, :mod:`service.capacity`).
- The jobs: :mod:`service.jobs` (the RQ jobs, their fan-out, a refit's lease, the worker
  process), above the store and the math of :mod:`worker`: the one part that loads torch.
- The API: the rest (:mod:`service.main`, its routes, schemas and pages, the stories of
  ``/next`` and of a model call), above the store; of :mod:`worker` it imports only the
  vocabulary (:mod:`worker.vocabulary`), and it enqueues the jobs by name, never importing
  them, so that the API process never loads torch.

This package's ``__init__`` imports nothing, so that importing one part loads no other
(``fbgp-al imports`` checks every rule).
"""
