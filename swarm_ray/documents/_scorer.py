"""The learned scorer and the one choice: per slot, the most likely candidate above a bar.

The fourth and fifth stages of the learned extraction. A gradient-boosted tree ensemble
(scikit-learn's `HistGradientBoostingClassifier`) is fitted on candidates labeled by gold
facts (`_training`) and saved as plain JSON: the trees' splits and leaf values, the
feature names and the hash of the labels it was fitted on. Scoring reads that JSON with
numpy alone, so a job needs no scikit-learn and no pickle, and a model file is small,
reviewable and portable across library versions.

`choose_scored` keeps, per field and slot (statistic), the candidate of highest
probability when it clears `threshold`; below it the field is not stated (or goes to the
LLM fallback). Ties go to the earlier candidate: first pages summarise.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from swarm_ray.documents._candidates import FieldCandidate
from swarm_ray.documents._features import FEATURES

__all__ = ["MODEL_PATH", "Scorer", "choose_scored", "fit_scorer", "load_scorer"]

MODEL_PATH = Path(__file__).with_name("model") / "scorer.json"
"""The model the job uses when present (`swarm-ray train-extractor` writes it)."""
THRESHOLD = 0.3
_THREADS = 2
"""OpenMP threads for fitting: more than the cores only thrash on a shared machine."""
"""Probability a slot's best candidate needs to be reported."""


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
    """A fitted tree ensemble over `FEATURES`, read from or written to JSON."""

    features: tuple[str, ...]
    baseline: float
    trees: tuple[_Tree, ...]
    threshold: float = THRESHOLD
    labels_hash: str = ""
    """SHA-256 of the gold files it was fitted on."""
    info: dict[str, Any] | None = None

    def probabilities(self, rows: Sequence[Sequence[float]]) -> np.ndarray:
        """The probability that each row's candidate is the slot's value."""
        if not rows:
            return np.zeros(0)
        x = np.asarray(rows, dtype=float)
        if x.shape[1] != len(self.features):
            raise ValueError(
                f"`Scorer` expects {len(self.features)} features, got {x.shape[1]}: "
                "retrain the model (`swarm-ray train-extractor`)"
            )
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

    def to_json(self) -> dict[str, Any]:
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


def choose_scored(
    candidates: Sequence[FieldCandidate], probabilities: Sequence[float], threshold: float
) -> list[tuple[FieldCandidate, float]]:
    """Per slot, the most probable candidate at or over `threshold`, with its probability."""
    best: dict[object, tuple[FieldCandidate, float]] = {}
    for candidate, p in zip(candidates, probabilities, strict=True):
        slot = (candidate.key, candidate.slot)
        if p >= threshold and (slot not in best or p > best[slot][1]):
            best[slot] = (candidate, float(p))
    return sorted(best.values(), key=lambda item: item[0].order)
