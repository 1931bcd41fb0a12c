"""The learned scorer and the one choice: per slot, the most likely candidate above a bar.

The fourth and fifth stages of the learned extraction. Two models, both saved as plain
JSON with the feature names and the hash of the labels they were fitted on, both read
with numpy alone (a job needs no scikit-learn and no pickle; a model file is small,
reviewable and portable across library versions):

- **trees** (`fit_scorer`): a gradient-boosted tree ensemble
  (scikit-learn's `HistGradientBoostingClassifier`), pointwise: each candidate's
  probability of being its slot's gold value, on its own;
- **listwise** (the shipped model, `fit_listwise`): a linear conditional logit over each slot's
  candidates and a "not stated" option, on standardised features with an L2 penalty. It
  learns which candidate beats its rivals, not a global probability: a slot's
  probabilities (with "not stated") sum to 1. Its JSON holds the scaler's means and
  scales, the weights and the score of "not stated".

`choose_scored` keeps, per entity, field and slot (statistic; `choice_groups`), the
candidate of highest probability when it clears `threshold`; below it the field is not
stated (or goes to the LLM fallback). Ties go to the earlier candidate: first pages summarise.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from swarm_ray.documents._candidates import FieldCandidate
from swarm_ray.documents._choice import file_part
from swarm_ray.documents._facts import Statistic
from swarm_ray.documents._features import FEATURES

__all__ = [
    "MODEL_PATH",
    "Scorer",
    "choice_groups",
    "choose_scored",
    "fit_listwise",
    "fit_scorer",
    "load_scorer",
]

MODEL_PATH = Path(__file__).with_name("model") / "scorer.json"
"""The shipped model (`swarm-ray train-extractor` writes it, `load_scorer` reads it). The
job chooses with the rules; `extract_facts(..., scorer=load_scorer())` chooses with it."""
THRESHOLD = 0.3
"""Probability a slot's best candidate needs to be reported."""
_THREADS = 2
"""OpenMP threads for fitting: more than the cores only thrash on a shared machine."""
LISTWISE_PENALTY = 100.0
"""L2 penalty of the listwise model's weights (on standardised features): chosen
leave-one-family-out among 1, 10, 100 and 1000."""


@dataclass(frozen=True)
class _Tree:
    feature: np.ndarray
    threshold: np.ndarray
    left: np.ndarray
    right: np.ndarray
    missing_left: np.ndarray
    leaf: np.ndarray
    value: np.ndarray


@dataclass(frozen=True)
class Scorer:
    """A fitted model over `FEATURES` (trees, or listwise linear), read from or written to JSON."""

    features: tuple[str, ...]
    baseline: float
    """Trees: the raw score every tree adds to. Listwise: the score of "not stated"."""
    trees: tuple[_Tree, ...]
    threshold: float = THRESHOLD
    labels_hash: str = ""
    """SHA-256 of the gold files it was fitted on."""
    info: dict[str, Any] | None = None
    weights: np.ndarray | None = None
    """Listwise only: one weight per standardised feature (`None`: a tree ensemble)."""
    mean: np.ndarray | None = None
    scale: np.ndarray | None = None

    @property
    def listwise(self) -> bool:
        return self.weights is not None

    def probabilities(
        self, rows: Sequence[Sequence[float]], slots: Sequence[object] | None = None
    ) -> np.ndarray:
        """The probability that each row's candidate is its slot's value.

        `slots` names each row's slot (field and statistic); the listwise model needs it,
        its probabilities being shares of the slot's. Trees score each row on its own.
        """
        if len(rows) == 0:
            return np.zeros(0)
        x = np.asarray(rows, dtype=float)
        if x.shape[1] != len(self.features):
            raise ValueError(
                f"`Scorer` expects {len(self.features)} features, got {x.shape[1]}: "
                "retrain the model (`swarm-ray train-extractor`)"
            )
        if self.weights is not None:
            if slots is None:
                raise ValueError("a listwise `Scorer` needs each row's slot")
            return self._listwise(x, slots)
        raw = np.full(len(x), self.baseline)
        index = np.arange(len(x))
        for tree in self.trees:
            node = np.zeros(len(x), dtype=int)
            active = ~tree.leaf[node]
            while active.any():
                at = node[active]
                values = x[index[active], tree.feature[at]]
                go_left = np.where(
                    np.isnan(values), tree.missing_left[at], values <= tree.threshold[at]
                )
                node[active] = np.where(go_left, tree.left[at], tree.right[at])
                active = ~tree.leaf[node]
            raw += tree.value[node]
        result: np.ndarray = 1.0 / (1.0 + np.exp(-raw))
        return result

    def _listwise(self, x: np.ndarray, slots: Sequence[object]) -> np.ndarray:
        assert self.weights is not None and self.mean is not None and self.scale is not None
        score = ((x - self.mean) / self.scale) @ self.weights
        ids: dict[object, int] = {}
        group = np.asarray([ids.setdefault(s, len(ids)) for s in slots], dtype=int)
        top = np.full(len(ids), self.baseline)
        np.maximum.at(top, group, score)
        e = np.exp(score - top[group])
        total = np.exp(self.baseline - top)
        np.add.at(total, group, e)
        result: np.ndarray = e / total[group]
        return result

    def to_json(self) -> dict[str, Any]:
        if self.weights is not None:
            assert self.mean is not None and self.scale is not None
            return {
                "format": "swarm-ray listwise linear 1",
                "features": list(self.features),
                "not_stated": self.baseline,
                "threshold": self.threshold,
                "labels_sha256": self.labels_hash,
                "info": self.info or {},
                "mean": [round(v, 9) for v in self.mean.tolist()],
                "scale": [round(v, 9) for v in self.scale.tolist()],
                "weights": [round(v, 9) for v in self.weights.tolist()],
            }
        return {
            "format": "swarm-ray tree ensemble 1",
            "features": list(self.features),
            "baseline": self.baseline,
            "threshold": self.threshold,
            "labels_sha256": self.labels_hash,
            "info": self.info or {},
            "trees": [
                {
                    "feature": t.feature.tolist(),
                    "threshold": t.threshold.tolist(),
                    "left": t.left.tolist(),
                    "right": t.right.tolist(),
                    "missing_left": t.missing_left.astype(int).tolist(),
                    "leaf": t.leaf.astype(int).tolist(),
                    "value": [round(v, 7) for v in t.value.tolist()],
                }
                for t in self.trees
            ],
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Scorer:
        if data.get("format") == "swarm-ray listwise linear 1":
            return cls(
                features=tuple(data["features"]),
                baseline=float(data["not_stated"]),
                trees=(),
                threshold=float(data.get("threshold", THRESHOLD)),
                labels_hash=str(data.get("labels_sha256", "")),
                info=dict(data.get("info") or {}),
                weights=np.asarray(data["weights"], dtype=float),
                mean=np.asarray(data["mean"], dtype=float),
                scale=np.asarray(data["scale"], dtype=float),
            )
        trees = tuple(
            _Tree(
                feature=np.asarray(t["feature"], dtype=int),
                threshold=np.asarray(t["threshold"], dtype=float),
                left=np.asarray(t["left"], dtype=int),
                right=np.asarray(t["right"], dtype=int),
                missing_left=np.asarray(t["missing_left"], dtype=bool),
                leaf=np.asarray(t["leaf"], dtype=bool),
                value=np.asarray(t["value"], dtype=float),
            )
            for t in data["trees"]
        )
        return cls(
            features=tuple(data["features"]),
            baseline=float(data["baseline"]),
            trees=trees,
            threshold=float(data.get("threshold", THRESHOLD)),
            labels_hash=str(data.get("labels_sha256", "")),
            info=dict(data.get("info") or {}),
        )

    def save(self, path: Path = MODEL_PATH) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(self.to_json(), separators=(",", ":")) + "\n")


def load_scorer(path: Path = MODEL_PATH) -> Scorer | None:
    """The model at `path`, or `None` when there is none (or it lists other features)."""
    if not path.is_file():
        return None
    scorer = Scorer.from_json(json.loads(path.read_text()))
    return scorer if scorer.features == FEATURES else None


def fit_scorer(
    rows: Sequence[Sequence[float]],
    labels: Sequence[int],
    *,
    labels_hash: str = "",
    threshold: float = THRESHOLD,
    seed: int = 0,
    params: dict[str, Any] | None = None,
) -> Scorer:
    """Fit the tree ensemble on labeled candidate rows (1: the slot's gold value)."""
    from sklearn.ensemble import HistGradientBoostingClassifier

    y = np.asarray(labels, dtype=int)
    if not set(np.unique(y).tolist()) <= {0, 1}:
        raise ValueError(f"`fit_scorer` takes labels 0 and 1, got {sorted(set(y.tolist()))!r}")
    settings: dict[str, Any] = {
        "max_iter": 100, "learning_rate": 0.08, "max_leaf_nodes": 7,
        "min_samples_leaf": min(20, max(2, len(y) // 20)), "l2_regularization": 1.0,
    }  # fmt: skip
    settings.update(params or {})
    model = HistGradientBoostingClassifier(**settings, random_state=seed)
    from threadpoolctl import threadpool_limits  # type: ignore[import-untyped]

    with threadpool_limits(limits=_THREADS):
        model.fit(np.asarray(rows, dtype=float), y)
    trees = []
    for predictors in model._predictors:
        nodes = predictors[0].nodes
        trees.append(
            _Tree(
                feature=nodes["feature_idx"].astype(int),
                threshold=nodes["num_threshold"].astype(float),
                left=nodes["left"].astype(int),
                right=nodes["right"].astype(int),
                missing_left=nodes["missing_go_to_left"].astype(bool),
                leaf=nodes["is_leaf"].astype(bool),
                value=nodes["value"].astype(float),
            )
        )
    baseline = float(np.ravel(model._baseline_prediction)[0])
    return Scorer(
        features=FEATURES,
        baseline=baseline,
        trees=tuple(trees),
        threshold=threshold,
        labels_hash=labels_hash,
        info={"candidates": len(y), "positives": int(y.sum()), "trees": len(trees)},
    )


def fit_listwise(
    rows: Sequence[Sequence[float]],
    labels: Sequence[int],
    slots: Sequence[object],
    *,
    labels_hash: str = "",
    threshold: float = THRESHOLD,
    penalty: float = LISTWISE_PENALTY,
) -> Scorer:
    """Fit the listwise model: per slot, a softmax over its candidates and "not stated".

    `slots` names each row's slot (unique across documents, e.g. with the file's name);
    rows labeled 1 are the slot's gold value (any of them is right); a slot with none is
    "not stated". The loss is each slot's negative log-likelihood plus `penalty` times the
    squared weights, minimised by L-BFGS on standardised features.
    """
    from scipy.optimize import minimize  # type: ignore[import-untyped]

    x = np.asarray(rows, dtype=float)
    y = np.asarray(labels, dtype=float)
    ids: dict[object, int] = {}
    group = np.asarray([ids.setdefault(s, len(ids)) for s in slots], dtype=int)
    order = np.argsort(group, kind="stable")
    x, y, group = x[order], y[order], group[order]
    mean = x.mean(axis=0)
    spread = x.std(axis=0)
    scale = np.where(spread < 1e-9, 1.0, spread)
    z = (x - mean) / scale
    starts = np.flatnonzero(np.r_[True, group[1:] != group[:-1]])
    index = np.searchsorted(starts, np.arange(len(group)), side="right") - 1
    stated = np.add.reduceat(y, starts) > 0
    width = z.shape[1]

    def loss(theta: np.ndarray) -> tuple[float, np.ndarray]:
        w, null = theta[:width], theta[width]
        s = z @ w
        top = np.maximum(np.maximum.reduceat(s, starts), null)
        e = np.exp(s - top[index])
        e_null = np.exp(null - top)
        total = np.add.reduceat(e, starts) + e_null
        e_gold = e * y
        gold = np.maximum(np.add.reduceat(e_gold, starts), 1e-300)
        right = np.where(stated, np.log(gold), null - top)
        value = float((np.log(total) - right).sum() + penalty * w @ w)
        wanted = np.where(stated[index], e_gold / gold[index], 0.0)
        grad_w = z.T @ (e / total[index] - wanted) + 2 * penalty * w
        grad_null = float((e_null / total - ~stated).sum())
        return value, np.r_[grad_w, grad_null]

    fitted = minimize(loss, np.zeros(width + 1), jac=True, method="L-BFGS-B",
                      options={"maxiter": 500})  # fmt: skip
    theta = np.asarray(fitted.x, dtype=float)
    return Scorer(
        features=FEATURES,
        baseline=float(theta[width]),
        trees=(),
        threshold=threshold,
        labels_hash=labels_hash,
        info={
            "candidates": len(y),
            "positives": int(y.sum()),
            "slots": len(starts),
            "model": "listwise",
            "penalty": penalty,
        },
        weights=theta[:width],
        mean=mean,
        scale=scale,
    )


Group = tuple[str, Statistic | None, str]
"""A choice group: the field's key, the slot, the part (`""`: the file's own)."""


def choice_groups(candidates: Sequence[FieldCandidate], file_name: str) -> list[Group]:
    """Each candidate's choice group: field, slot and part.

    The choice is one per entity, field and statistic. A file about one part (named after
    a part its tables name, `_choice.file_part`) has one group per field and slot: its
    candidates' `entity` is that part or `None` (`_candidates`). A family's datasheet (its
    tables name two parts or more, none the file's) has one per part named, and one
    (part `""`) for the values no part names. The listwise model's probabilities are
    shares of a group's, in training as in use.
    """
    parts = sorted({c.entity for c in candidates if c.entity})
    named = file_part(file_name, parts) if parts else None
    return [(c.key, c.slot, "" if c.entity in (None, named) else c.entity) for c in candidates]


def choose_scored(
    candidates: Sequence[FieldCandidate],
    probabilities: Sequence[float],
    threshold: float,
    groups: Sequence[Group],
) -> list[tuple[FieldCandidate, float]]:
    """Per choice group, the most probable candidate at or over `threshold`.

    One per entity, field and statistic (`choice_groups`), with its probability. One
    value of a page fills one slot of its field and part: a plain `+5 V` that is the best
    of both the `min` and the `max` slots is reported in the more probable one only. In a
    family's datasheet a field the parts' rows or columns give is reported per part, and
    a value no part names only for fields no part gives. A chosen candidate's `entity` is
    its part, or `None` where it names none. `groups` are the candidates' `choice_groups`,
    those their probabilities were computed in.
    """
    best: dict[Group, tuple[FieldCandidate, float]] = {}
    for candidate, group, p in zip(candidates, groups, probabilities, strict=True):
        if p >= threshold and (group not in best or p > best[group][1]):
            best[group] = (candidate, float(p))
    by_part = {group[0] for group in best if group[2]}
    once: dict[object, tuple[FieldCandidate, float]] = {}
    for group, (candidate, p) in best.items():
        if not group[2] and group[0] in by_part:
            continue  # the parts' own values, not the family's
        value = (candidate.key, group[2], candidate.page, candidate.scaled, candidate.value)
        if value not in once or p > once[value][1]:
            once[value] = (candidate, p)
    return sorted(once.values(), key=lambda item: item[0].order)
