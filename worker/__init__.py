"""The computational core: transforms, the GP, NUTS over its hyperparameters, acquisitions, designs;
and, in :mod:`worker.jobs`, the RQ glue that runs it for the service.

The modules of ``worker/`` itself are math: they import only torch, pyro, gpytorch, numpy and
scipy, and nothing of the service, the queue or the clients. Among them the vocabulary every
layer shares loads no torch: ``worker.space`` (the inputs and their mapping, numpy only),
``worker.design`` (pools and designs) and ``worker.defaults`` (plain Python), so that the API and
the SDK import them. ``worker.jobs`` is the one layer that imports both the store and the math
(``fbgp-al imports`` checks every rule).
"""
