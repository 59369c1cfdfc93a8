"""The paper's experiments (Riis et al., NeurIPS 2022) against the service and in process.

- :mod:`~clients.reproduction.protocol`: the protocol as data and each run's seeded setup;
- :mod:`~clients.reproduction.bench`: ``fbgp-al bench``, the command; one run of it is
  :mod:`~clients.reproduction.runs`, its closing report :mod:`~clients.reproduction.report`;
- :mod:`~clients.reproduction.results`: the results file; :mod:`~clients.reproduction.rdauc`:
  RD-AUC beside the paper's Table 2; :mod:`~clients.reproduction.claims`: which claims held;
  :mod:`~clients.reproduction.plots`: learning curves; :mod:`~clients.reproduction.figures`:
  the tables of ``docs/reproduction``'s notes;
- :mod:`~clients.reproduction.demo`: ``fbgp-al demo``, the loop in process;
  :mod:`~clients.reproduction.core_benchmark`: ``fbgp-al bench-core``, against Pyro.
"""
