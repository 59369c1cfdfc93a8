"""A refit's scoring of its candidates as data (:class:`Scoring`): the acquisition, each output's
thinned draws and labels, and a greedy batch's pending inputs. A worker that scores a part of
the candidates for another's refit (:func:`service.jobs.score_part`) rebuilds it from plain JSON
(:meth:`Scoring.to_plain`), its arrays the base64 of their float64 bytes (:func:`pack`): the
same numbers, bit for bit, so its scores are those the refit's own process would give.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass, replace

import numpy as np
import torch

from fbgp_al.worker.acquisition import batch_scores
from fbgp_al.worker.acquisition import evaluate as acquisition_values
from fbgp_al.worker.mcmc import Posterior


def pack(values) -> dict:
    """A float64 array (or tensor) as plain JSON: its shape and the base64 of its bytes (C order,
    little-endian). Exact to the bit, NaN and infinities included, and compact: a job's
    arguments and results are JSON, never a pickle."""
    array = np.asarray(values, dtype="<f8")
    return {"shape": list(array.shape), "float64": base64.b64encode(array.tobytes()).decode()}


def unpack(plain: dict) -> np.ndarray:
    """The array :func:`pack` made (a writable copy)."""
    raw = base64.b64decode(plain["float64"], validate=True)
    return np.frombuffer(raw, dtype="<f8").astype(np.float64).reshape(plain["shape"])


def _tensor(plain: dict | None) -> torch.Tensor | None:
    return None if plain is None else torch.from_numpy(unpack(plain))


@dataclass(frozen=True)
class Output:
    """One output as its scoring sees it: its weight, its thinned draws (``post``), its labels
    in the GP's units (``u``, ``z``, and their known noise variances or None) and its seed."""

    weight: float
    post: Posterior
    u: torch.Tensor
    z: torch.Tensor
    noise: torch.Tensor | None
    seed: int

    def to_plain(self) -> dict:
        post = self.post
        return {
            "weight": float(self.weight),
            "seed": int(self.seed),
            "chains": int(post.chains),
            "lengthscale": pack(post.lengthscale),
            "noise_draws": pack(post.noise),
            "mode_lengthscale": pack(post.mode_lengthscale),
            "mode_noise": pack(post.mode_noise),
            "u": pack(self.u),
            "z": pack(self.z),
            "noise": None if self.noise is None else pack(self.noise),
        }

    @classmethod
    def from_plain(cls, plain: dict) -> Output:
        post = Posterior(
            lengthscale=_tensor(plain["lengthscale"]),
            noise=_tensor(plain["noise_draws"]),
            chains=int(plain["chains"]),
            mode_lengthscale=_tensor(plain["mode_lengthscale"]),
            mode_noise=float(unpack(plain["mode_noise"])),
        )
        return cls(
            float(plain["weight"]),
            post,
            _tensor(plain["u"]),
            _tensor(plain["z"]),
            _tensor(plain["noise"]),
            int(plain["seed"]),
        )


KINDS = ("single", "combined", "batch")


@dataclass(frozen=True)
class Scoring:
    """The scores of candidates, each depending on its candidate alone (so that they may be
    scored in parts, on other workers): ``single``, acquisition ``name`` of the one output;
    ``combined``, :func:`combined_scores` of several; ``batch``, a greedy batch's first scoring
    (:func:`worker.acquisition.batch_scores`), with the ``pending`` inputs as fantasies."""

    name: str
    outputs: tuple[Output, ...]
    kind: str = "single"
    pending: torch.Tensor | None = None

    def __call__(self, candidates: torch.Tensor) -> torch.Tensor:
        if self.kind == "batch":
            parts = [(o.weight, o.post, o.u, o.z, o.noise) for o in self.outputs]
            return batch_scores(self.name, parts, candidates, pending=self.pending)
        if self.kind == "combined":
            return combined_scores(
                self.name, [(o.weight, o.post, o) for o in self.outputs], candidates
            )
        (one,) = self.outputs
        return acquisition_values(
            self.name, one.post, one.u, one.z, candidates, seed=one.seed, label_noise=one.noise
        )

    @property
    def draws(self) -> int:
        """The most draws of an output (each candidate's score costs them times ``n^2``)."""
        return max(len(o.post.noise) for o in self.outputs)

    @property
    def labels(self) -> int:
        """The most labels of an output, the pending inputs counted (in a batch's fantasies)."""
        pending = 0 if self.pending is None or self.kind != "batch" else len(self.pending)
        return max(len(o.z) for o in self.outputs) + pending

    def with_draws(self, draws: int) -> Scoring:
        """The same scoring on about ``draws`` of each output's draws, spread evenly over its
        chains (:meth:`worker.mcmc.Posterior.spread`)."""
        outputs = tuple(replace(o, post=o.post.spread(draws)) for o in self.outputs)
        return replace(self, outputs=outputs)

    def to_plain(self) -> dict:
        return {
            "name": self.name,
            "kind": self.kind,
            "outputs": [o.to_plain() for o in self.outputs],
            "pending": None if self.pending is None else pack(self.pending),
        }

    @classmethod
    def from_plain(cls, plain: dict) -> Scoring:
        if plain["kind"] not in KINDS:
            raise ValueError(f"no scoring of kind {plain['kind']!r}")
        return cls(
            str(plain["name"]),
            tuple(Output.from_plain(o) for o in plain["outputs"]),
            plain["kind"],
            _tensor(plain["pending"]),
        )


def combined_scores(
    name: str, parts: list[tuple], candidates, version_seed: int | None = None
) -> torch.Tensor:
    """A multi-output acquisition: ``sum_k w_k * score_k``, each output's score in its own
    standardized units (so no output dominates by its units). ``random``: output 0's random
    scores alone. ``parts``: each output's ``(weight, thinned draws, data)``, ``data`` holding
    its ``u``, ``z``, ``noise`` and ``seed`` (:class:`worker.fitting.Data`, or an
    :class:`Output`); the scores' seeds are the outputs' (``version_seed + k`` instead when
    given)."""
    total = None
    for k, (weight, thin, data) in enumerate(parts):
        seed = data.seed if version_seed is None else version_seed + k
        scores = acquisition_values(
            name, thin, data.u, data.z, candidates, seed=seed, label_noise=data.noise
        )
        if name == "random":
            return scores
        total = weight * scores if total is None else total + weight * scores
    return total
