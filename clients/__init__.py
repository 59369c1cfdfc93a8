"""The Python SDK of the fbgp-al labeling service: what a user's code may rely on.

- :mod:`clients.client`: :class:`~clients.client.FbgpClient`, a typed HTTP client for the whole
  API (retries where they are safe, long-polling ``/next``, ``wait_for_model``), with what it
  answers (:mod:`clients.responses`), its errors (:mod:`clients.errors`) and its retrying
  transport (:mod:`clients.transport`);
- :mod:`clients.runner`: :func:`~clients.runner.run_simulator`, a remote simulator in one call;
- :mod:`clients.simulators`: the paper's seven built-in simulators (``get_simulator``);
- :mod:`clients.metamodel`: :class:`~clients.metamodel.Metamodel`, a campaign's exported model
  (``FbgpClient.export_model``), predicting as ``/predict`` does without the service;
- ``clients/data/``: the tables they read.

It needs only httpx and numpy (``pip install fbgp-al``) and imports neither the service, the
workers nor torch. The rest lives in subpackages that need the server's dependencies
(``pip install 'fbgp-al[server]'``): :mod:`clients.reproduction`, the paper's experiments
(protocol, ``fbgp-al bench`` and its report, RD-AUC, plots, the in-process demo, the core
benchmark), and :mod:`clients.ops`, operations tooling (``fbgp-al up``'s local stack, ``fbgp-al
simulate``, the soak test, the service benchmark).
"""
