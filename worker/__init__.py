"""The math: transforms, the GP, NUTS over its hyperparameters, acquisitions, a refit's fitting
and ranking, a model's answers and plots; and, in :mod:`worker.vocabulary`, the vocabulary of a
campaign's spec that every layer shares.

``worker/`` imports nothing of the service or the clients, and no queue, store or web library:
its modules import torch, pyro, numba, numpy, scipy and matplotlib and, of the product, only
``worker/`` itself. :mod:`worker.vocabulary` (the inputs and their mapping, pools and designs,
defaults) loads no torch and imports nothing of the product beyond itself, so that the API, the
workers and the SDK all import it. The RQ jobs that run the math for the service, reading and
writing the store, are :mod:`service.jobs` (``fbgp-al imports`` checks every rule).
"""
