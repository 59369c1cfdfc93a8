"""The computational core: transforms, the GP, NUTS over its hyperparameters, acquisitions, designs.

The math modules import only torch, pyro, gpytorch, numpy and scipy; ``worker.design`` imports no
torch at all, so clients can use it. Nothing here imports the service or the queue.
"""
