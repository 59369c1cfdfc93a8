"""A campaign's model, taken home: :class:`Metamodel` loads the document that ``GET
/campaigns/{id}/model/export`` answers (``Client.export_model``, ``fbgp-al export``) and
predicts as ``POST /campaigns/{id}/predict`` does, with numpy alone and no service.

```python
from fbgp_al import Metamodel

model = Metamodel.load("campaign.json")       # a path, an open file or the parsed document
p = model.predict([[0.3, 1.2], [2.0, 0.5]])   # m x d, original units
p["mean"], p["variance"], p["mixture_mean"], p["mixture_variance"]
```

The GP is the service's (``worker/gp.py``): inputs scaled to the unit cube by the declared
bounds, outputs standardized by the labels' mean and standard deviation, zero mean, an ARD RBF
kernel of unit output scale, and the covariance of the labels
``K = Kf + diag(noise / y_std^2) + s2 I`` (the labels' known ``noise`` variances, when the
document carries them, and the learned nugget ``s2``). ``mean`` and ``variance`` are the
posterior-mode GP's, of y (``s2`` included), in original units; ``mixture_mean`` and
``mixture_variance`` are the moments of the equal-weight mixture of the GPs of the
``acquisition_samples`` draws (mean of their means; mean of their variances plus the population
variance of their means). Int, log and choice inputs map to the GP's features as the service
maps them (:mod:`worker.vocabulary.space`, numpy only): a choice's value is given as itself.

An output modeled on the log scale (``transform.y_transform`` ``log``) has its GP on ``log y``;
its predictions are lognormal, in its units, as ``/predict``'s (:mod:`worker.vocabulary.lognormal`):
``mean``, ``variance``, ``median``, the 95% interval's ``lower`` and ``upper``, and the mixture's.
"""

from __future__ import annotations

import json
import os
from typing import IO, Any

import numpy as np

from fbgp_al.clients.failure_model import FailureModel
from fbgp_al.clients.fidelity_metamodel import KERNEL as FIDELITY_KERNEL
from fbgp_al.clients.fidelity_metamodel import FidelityMetamodel
from fbgp_al.clients.numpy_gp import BLOCK_ELEMENTS, FIT_ELEMENTS, Fitted
from fbgp_al.clients.prediction import Prediction
from fbgp_al.worker.vocabulary import lognormal, sobol
from fbgp_al.worker.vocabulary.space import Space, by_name

FORMAT = "fbgp-al-metamodel"
# 1: one output; 2: several (``outputs``), each read as a version 1 model; 3: either, with an
# output modeled on the log scale (``y_transform``), which older readers must refuse
FORMAT_VERSION = 3
KERNEL = "rbf-ard"

# The memory a loaded model may hold for its factors, by default: each GP's ``L^-1`` (``n x n``
# float64, the mode's and every draw's), factorized once per load, plus the work of fitting
# them in groups. A model that needs more is refused at load with what it needs (pass
# ``memory=`` or ``draws=``): 150 draws at 1,000 labels need 1.2 GB, at 2,000 labels 4.8 GB.
MEMORY_BUDGET = 2 << 30


def _parsed(f: IO) -> Any:
    """The JSON document in ``f``; one nested too deeply for the parser is a ValueError."""
    try:
        return json.load(f)
    except RecursionError:
        raise ValueError("the document is nested too deeply to be an exported model") from None


def _typed(inputs: list[dict]) -> bool:
    """Whether any input is an int, log or choice one (mapped by :mod:`worker.vocabulary.space`)."""
    return any(i.get("type", "float") != "float" for i in inputs)


def _numbers(value: Any, what: str, depth: int) -> np.ndarray:
    """``value`` as a float array, if it holds JSON numbers alone (no strings, booleans or
    nulls, which numpy would read as numbers or objects) nested at most ``depth`` lists deep."""
    stack = [(value, 0)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, (list, tuple)):
            if level >= depth:
                raise ValueError(f"the document's {what} is nested deeper than {depth} lists")
            stack.extend((v, level + 1) for v in item)
        elif isinstance(item, bool) or not isinstance(item, (int, float)):
            raise ValueError(
                f"the document's {what} must hold numbers, not {type(item).__name__} {item!r:.40}"
            )
    return np.asarray(value, dtype=float)


def _draws(block: Any, d: int, what: str) -> tuple[np.ndarray, np.ndarray]:
    try:
        lengthscale = _numbers(block["lengthscale"], what, 2).reshape(-1, d)
        noise = _numbers(block["noise"], what, 1).reshape(-1)
    except (KeyError, TypeError, ValueError) as error:
        raise ValueError(f"the document's {what} are malformed: {error}") from None
    if len(lengthscale) != len(noise) or not len(noise):
        raise ValueError(f"the document's {what} need as many lengthscale rows as noise values")
    finite = np.isfinite(lengthscale).all() and np.isfinite(noise).all()
    if not (finite and np.all(lengthscale > 0) and np.all(noise >= 0)):
        raise ValueError(f"the document's {what} need finite lengthscales > 0 and noise >= 0")
    return lengthscale, noise


class Metamodel:
    """A campaign's exported model (see the module's docstring); ``document`` is the parsed
    export. ``inputs`` (``[{"name", "lower", "upper"}, ...]``), ``version``, ``n_labeled`` and
    ``campaign`` (``{"id", "name"}``) are the document's."""

    def __init__(self, document: dict, *, memory: int = MEMORY_BUDGET, draws: int | None = None):
        if not isinstance(document, dict) or document.get("format") != FORMAT:
            raise ValueError(f"not an exported model: its 'format' is not {FORMAT!r}")
        version = document.get("format_version")
        several = version in (2, 3) and "outputs" in document
        if not isinstance(version, int) or version > 3 or (version == 2 and not several):
            raise ValueError(
                f"format_version {version!r} is not one this SDK reads (1, 2 with "
                "outputs, or 3); upgrade fbgp-al"
            )
        if document.get("kernel", KERNEL) != KERNEL:
            raise ValueError(f"kernel {document.get('kernel')!r} is not {KERNEL!r}")
        self.document = document
        self.outputs: dict[str, Metamodel] | None = None
        if several:
            self._read_outputs(document, memory, draws)
            return
        try:
            self._read(document, memory, draws)
        except KeyError as error:
            raise ValueError(f"the document lacks {error}: not a whole exported model") from None
        except (TypeError, ValueError) as error:
            if str(error).startswith("the document"):
                raise
            raise ValueError(f"the document is malformed: {error}") from None

    def _read_outputs(self, document: dict, memory: int, draws: int | None) -> None:
        """A multi-output document: one single-output :class:`Metamodel` per output
        (``outputs``), each on its own draws, mode, output transform and values of the labels."""
        try:
            outputs, data = document["outputs"], document["data"]
            if not isinstance(outputs, dict) or not outputs:
                raise ValueError("the document's outputs must be an object {name: model}")
            self.campaign = dict(document.get("campaign", {}))
            self.version, self.n_labeled = int(document["version"]), int(document["n_labeled"])
            self.inputs = [dict(i) for i in document["inputs"]]
            rows, noise = data["y"], data.get("noise")
            self.outputs = {}
            for name, part in outputs.items():
                single = {key: value for key, value in document.items() if key != "outputs"}
                single.update(
                    format_version=1,
                    samples=part.get("samples"),
                    acquisition_samples=part["acquisition_samples"],
                    mode=part["mode"],
                    transform={**document["transform"], **part["transform"]},
                    data={"x": data["x"], "y": [row[name] for row in rows]},
                )
                if noise is not None:
                    single["data"]["noise"] = [row[name] for row in noise]
                self.outputs[name] = Metamodel(single, memory=memory, draws=draws)
            first = next(iter(self.outputs.values()))
            self.memory = sum(model.memory for model in self.outputs.values())
            self.lower, self.upper, self.space = first.lower, first.upper, first.space
        except (KeyError, TypeError) as error:
            raise ValueError(f"the document's outputs are malformed: {error!r}") from None
        if self.memory > memory:
            raise ValueError(
                f"this model needs {self.memory / 2**30:.2f} GiB to predict from "
                f"({len(self.outputs)} outputs), over the budget of "
                f"{memory / 2**30:.2f} GiB: pass memory= (bytes) or draws= (fewer "
                "draws, evenly spread) to load it"
            )

    def _read(self, document: dict, memory: int, draws: int | None) -> None:
        self.campaign = dict(document.get("campaign", {}))
        self.version = int(document["version"])
        self.n_labeled = int(document["n_labeled"])
        self.inputs = [dict(i) for i in document["inputs"]]
        t = document["transform"]
        self.lower = _numbers(t["lower"], "transform", 1).reshape(-1)
        self.upper = _numbers(t["upper"], "transform", 1).reshape(-1)
        self.y_mean = float(_numbers(t["y_mean"], "transform", 0))
        self.y_std = float(_numbers(t["y_std"], "transform", 0))
        if t.get("y_transform", "none") not in ("none", "log"):
            raise ValueError(f"y_transform {t['y_transform']!r:.40} is unknown: upgrade fbgp-al")
        self.log = t.get("y_transform") == "log"
        d = self.dim
        finite = np.isfinite([*self.lower, *self.upper, self.y_mean, self.y_std]).all()
        if not (finite and self.y_std > 0 and np.all(self.lower < self.upper)):
            raise ValueError(
                "the document's transform needs finite bounds, lower < upper, and y_std > 0"
            )
        if self.lower.shape != (d,) or self.upper.shape != (d,) or len(self.inputs) != d:
            raise ValueError("the document's transform and inputs disagree on the dimension")
        data = document["data"]
        y = _numbers(data["y"], "data.y", 1).reshape(-1)
        self.space = Space.of(self.inputs) if _typed(self.inputs) else None
        if self.space is not None:  # int, log and choice inputs: the service's feature map
            self._features = self.space.n_features
            x = self.space.codes(data["x"], check=False)
        else:
            self._features = d
            x = _numbers(data["x"], "data.x", 2)
        if x.shape != (len(y), d):
            raise ValueError(f"the document's data.x is {x.shape}, not {len(y)} points of {d}")
        if len(y) != self.n_labeled:
            raise ValueError(
                f"the document holds {len(x)} inputs and {len(y)} outputs; its "
                f"model saw n_labeled = {self.n_labeled}"
            )
        if not (np.isfinite(x).all() and np.isfinite(y).all()):
            raise ValueError("the document's data must be finite")
        if self.log and not np.all(y > 0):
            raise ValueError(
                "the document's output is modeled on the log scale: its data.y must be > 0"
            )
        self.x, self.y = x, y
        self.noise = None
        if data.get("noise") is not None:
            self.noise = _numbers(data["noise"], "data.noise", 1).reshape(-1)
            if len(self.noise) != len(y) or not np.all(np.isfinite(self.noise) & (self.noise >= 0)):
                raise ValueError("the document's data.noise needs one variance >= 0 per label")
        mode = document["mode"]
        f = self._features
        self.mode_lengthscale, self.mode_noise = _draws(
            {"lengthscale": [mode["lengthscale"]], "noise": [mode["noise"]]}, f, "mode"
        )
        self.draw_lengthscale, self.draw_noise = _draws(
            document["acquisition_samples"], f, "acquisition_samples"
        )
        if draws is not None:  # a subset, evenly spread over the draws (chain by chain)
            if isinstance(draws, bool) or not (isinstance(draws, int) and draws >= 1):
                raise ValueError("draws must be an integer >= 1")
            keep = np.unique(np.linspace(0, len(self.draw_noise) - 1, draws).round().astype(int))
            self.draw_lengthscale = self.draw_lengthscale[keep]
            self.draw_noise = self.draw_noise[keep]
        # the labels in the GP's units
        self._u = self._gp(x)
        with np.errstate(all="ignore"):  # a log output: log y, its noise by the delta method
            self._z = ((np.log(y) if self.log else y) - self.y_mean) / self.y_std
            noise = None if self.noise is None else self.noise / (y**2 if self.log else 1.0)
            self._noise_z = None if noise is None else noise / self.y_std**2
        # the service standardizes by the labels' own mean and sd, so that no label lies more
        # than sqrt(n) sds from 0; far beyond it the squares overflow and answers are NaN
        spread = float(np.abs(self._z).max()) if len(self._z) else 0.0
        fits = np.isfinite(spread) and spread <= max(10.0, len(self._z))
        if not (fits and (self._noise_z is None or np.isfinite(self._noise_z).all())):
            raise ValueError(
                f"the document's transform (y_mean {self.y_mean:g}, y_std "
                f"{self.y_std:g}) does not standardize its labels: they lie up to "
                f"{spread:.3g} sds from the mean in the GP's units"
            )
        n, kept = len(y), len(self.draw_noise) + 1
        self.memory = kept * n * n * 8 + min(kept * n * n, FIT_ELEMENTS) * 8 * 3
        if self.memory > memory:
            raise ValueError(
                f"this model needs {self.memory / 2**30:.2f} GiB to predict from ({kept - 1} "
                f"draws and the mode at {n} labels, each GP's factor kept once per load), over "
                f"the budget of {memory / 2**30:.2f} GiB: pass memory= (bytes) or draws= (fewer "
                "draws, evenly spread) to load it"
            )
        self._mode = None
        self._draws_fitted = None
        failures = document.get("failures")  # where runs had failed: p_success
        self.failures = None if failures is None else FailureModel(failures, f)

    @property
    def dim(self) -> int:
        return len(self.lower)

    @classmethod
    def load(
        cls,
        source: str | os.PathLike | IO | dict,
        *,
        memory: int = MEMORY_BUDGET,
        draws: int | None = None,
    ) -> Metamodel:
        """From a path to the exported JSON file, an open file (text or binary) or the
        document already parsed. ``memory``: the bytes its factors may take (``MEMORY_BUDGET``,
        2 GiB, by default; a model that needs more is refused, saying what it needs);
        ``draws``: predict from that many of the draws, evenly spread (fewer bytes). Each GP is
        factorized once, at the first prediction. A campaign with fidelities' model is a
        :class:`~clients.fidelity_metamodel.FidelityMetamodel`."""
        if isinstance(source, (str, os.PathLike)):
            with open(source, "rb") as f:
                source = _parsed(f)
        elif hasattr(source, "read"):
            source = _parsed(source)
        if not isinstance(source, dict):
            raise TypeError(f"load takes a path, a file or a dict, not {type(source).__name__}")
        if source.get("kernel") == FIDELITY_KERNEL:  # a campaign with fidelities'
            return FidelityMetamodel(source)
        return cls(source, memory=memory, draws=draws)

    def _points(self, x) -> np.ndarray:
        """``x`` as an ``m x d`` float array (of codes, where inputs are typed: a choice's value
        as its index); with one input a flat array is that many points, with more a flat array
        of ``d`` values is one point; a point may be a mapping of the inputs' names to values."""
        try:
            x = by_name(x, [i["name"] for i in self.inputs]) if isinstance(x, (list, tuple)) else x
        except ValueError as error:
            raise ValueError(f"x: {error}") from None
        if self.space is not None:
            x = [x] if len(x) and not isinstance(x[0], (list, tuple, np.ndarray)) else x
            if self.dim == 1 and len(x) and len(x[0]) != 1:
                x = [[v] for v in x[0]]
            try:
                return self.space.codes(x, check=False)  # extrapolated beyond the bounds
            except ValueError as error:
                raise ValueError(f"x: {error}") from None
        try:
            points = np.asarray(x, dtype=float)
        except (TypeError, ValueError) as error:
            raise ValueError(f"x must be numbers, m x {self.dim}: {error}") from None
        if points.ndim == 1:
            points = points[:, None] if self.dim == 1 else points[None, :]
        names = ", ".join(i["name"] for i in self.inputs)
        if points.ndim != 2 or points.shape[1] != self.dim:
            raise ValueError(f"x must be m x {self.dim} (inputs {names}); got shape {np.shape(x)}")
        bad = np.flatnonzero(~np.isfinite(points).all(1))
        if len(bad):
            raise ValueError(f"point {int(bad[0])} of x is not finite")
        return points

    def _gp(self, codes: np.ndarray) -> np.ndarray:
        """Points (codes, ``m x d``) as the GP's features."""
        if self.space is not None:
            return self.space.features(self.space.code_to_pool(codes))
        return (codes - self.lower) / (self.upper - self.lower)

    def predict(self, x) -> Prediction | dict[str, Prediction]:
        """At ``x`` (``m x d``, original units; points outside the declared bounds are
        extrapolated, where ``/predict`` answers 422): ``mean`` and ``variance`` of y under the
        posterior-mode GP, ``mixture_mean`` and ``mixture_variance`` under the mixture of the
        draws' GPs, each an array of ``m``, original units, and where the model has a failure
        model ``p_success``, the probability that a run at each point succeeds, as
        ``/predict`` answers: a
        :class:`~clients.prediction.Prediction` (``p["mean"]`` or ``p.mean``). A multi-output
        model answers ``{name: Prediction}``, as ``/predict``'s ``outputs`` and
        ``Client.predict`` do."""
        if self.outputs is not None:  # the points and the failure model's answer once
            first = next(iter(self.outputs.values()))
            cand = first._gp(first._points(x))
            p = None if first.failures is None else first.failures.p_success(cand)
            return {name: model._predict(cand, p) for name, model in self.outputs.items()}
        cand = self._gp(self._points(x))
        return self._predict(cand, None if self.failures is None else self.failures.p_success(cand))

    def _predict(self, cand: np.ndarray, p_success: np.ndarray | None) -> Prediction:
        """:meth:`predict` at the GP's features ``cand``, with the failure model's answer."""
        self._fit()
        mean, var = self._mode.predict(cand)
        if self.log:
            return Prediction(
                **self._lognormal(mean[0], var[0], cand),
                model_version=self.version,
                p_success=p_success,
            )
        mixture_mean, mixture_var = self._mixture(cand)
        return Prediction(
            mean=self.y_mean + mean[0] * self.y_std,
            variance=var[0] * self.y_std**2,
            mixture_mean=self.y_mean + mixture_mean * self.y_std,
            mixture_variance=mixture_var * self.y_std**2,
            model_version=self.version,
            p_success=p_success,
        )

    def _fit(self) -> None:
        """Each GP factorized, once, at the first prediction or sensitivity."""
        if self._mode is None:
            self._mode = Fitted(
                self._u, self._z, self._noise_z, self.mode_lengthscale, self.mode_noise
            )
            self._draws_fitted = Fitted(
                self._u, self._z, self._noise_z, self.draw_lengthscale, self.draw_noise
            )

    def sensitivity(
        self,
        *,
        method: str = "closed-form",
        level: float = 0.95,
        samples: int = 8192,
        seed: int = 0,
    ) -> dict:
        """The first-order and total Sobol index of each input, as ``GET
        /campaigns/{id}/sensitivity`` answers them for the same model: ``inputs``, ``first``
        and ``total`` (each ``{"mean", "low", "high"}``, a list per input: their mean over the
        ``acquisition_samples`` draws and the central ``level`` interval), ``variance`` of the
        mean in the output's units, ``draws``, ``level`` and ``method``. Inputs are uniform
        over their bounds (a log input on the log scale, an int and a choice over their
        values). ``method``: ``"closed-form"`` (each draw's GP mean integrated exactly) or
        ``"monte-carlo"`` (``samples`` points per draw, from ``seed``). A multi-output model
        answers ``{"outputs": {name: ...}}``."""
        if self.outputs is not None:
            return {
                "outputs": {
                    name: model.sensitivity(method=method, level=level, samples=samples, seed=seed)
                    for name, model in self.outputs.items()
                }
            }
        if method not in sobol.METHODS:
            raise ValueError(f"method {method!r} is not one of {sobol.METHODS}")
        if not 0 < level < 1:
            raise ValueError("level must lie between 0 and 1")
        self._fit()
        space = self.space if self.space is not None else Space.of(self.inputs)
        alpha, lengthscale = self._draws_fitted.alpha, self.draw_lengthscale
        if method == "closed-form":
            per_draw = sobol.closed_form(space, self._u, alpha, lengthscale)
        else:
            mean = sobol.gp_mean(space, self._u, alpha, lengthscale)
            per_draw = sobol.monte_carlo(space, mean, samples=samples, seed=seed)
        return dict(
            sobol.summarize(per_draw, space, level, method, y_std=self.y_std),
            model_version=self.version,
        )

    def _lognormal(self, mean: np.ndarray, var: np.ndarray, cand: np.ndarray) -> dict:
        """A log output's predictions (:func:`worker.vocabulary.lognormal.predictions`), the draws'
        block by block."""
        step = max(1, BLOCK_ELEMENTS // len(self.draw_noise))
        draws = (self._draws_fitted.predict(cand[i : i + step]) for i in range(0, len(cand), step))
        return lognormal.predictions(self.y_mean, self.y_std, mean, var, draws)

    def _mixture(self, cand: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The mixture's mean and variance of z at ``cand``, block by block of candidates
        (``BLOCK_ELEMENTS`` predictions of the draws at a time), from the draws' factors."""
        batch = len(self.draw_noise)
        mixture_mean, mixture_var = np.empty(len(cand)), np.empty(len(cand))
        step = max(1, BLOCK_ELEMENTS // batch)
        for i in range(0, len(cand), step):
            means, variances = self._draws_fitted.predict(cand[i : i + step])
            mixture_mean[i : i + step] = means.mean(0)
            # QB-MGP's score: the draws' mean variance plus their means' population variance
            mixture_var[i : i + step] = variances.mean(0) + means.var(0)
        return mixture_mean, mixture_var

    def __repr__(self) -> str:
        names = ", ".join(i["name"] for i in self.inputs)
        if self.outputs is not None:
            return (
                f"Metamodel(campaign={self.campaign.get('id')!r}, version={self.version}, "
                f"n_labeled={self.n_labeled}, inputs=[{names}], "
                f"outputs=[{', '.join(self.outputs)}])"
            )
        return (
            f"Metamodel(campaign={self.campaign.get('id')!r}, version={self.version}, "
            f"n_labeled={self.n_labeled}, inputs=[{names}], "
            f"draws={len(self.draw_noise)})"
        )
