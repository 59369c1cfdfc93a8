"""The computational core: transforms, the GP, NUTS over its hyperparameters, acquisitions;
the vocabulary of a campaign's spec, in :mod:`worker.vocabulary`; and, in :mod:`worker.jobs`, the RQ
glue that runs the math for the service.

The modules of ``worker/`` itself are math: they import only torch, pyro, gpytorch, numpy and
scipy, and nothing of the service, the queue or the clients. :mod:`worker.vocabulary` (the inputs
and their mapping, pools and designs, defaults) loads no torch and imports nothing of the
product beyond itself, so that the API, the workers and the SDK all import it.
``worker.jobs`` is the one layer that imports both the store and the math (``fbgp-al imports``
checks every rule).
"""
