"""How much an observation gives away: a linear probe from observations to the actions a team
should take, beside the best constant (shared by the LEMON env benchmarks)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np


def fit_probe(train_x: np.ndarray, train_y: np.ndarray, test_x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A logistic regression per action component (standardised inputs) fit on the training rows:
    its predictions for the test rows, and the most frequent training action's, ``[rows, components]``."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.preprocessing import StandardScaler

    scaler = StandardScaler().fit(train_x)
    xs, xt = scaler.transform(train_x), scaler.transform(test_x)
    predicted, constant = [], []
    for c in range(train_y.shape[1]):
        values, counts = np.unique(train_y[:, c], return_counts=True)
        constant.append(np.full(len(test_x), values[np.argmax(counts)]))
        if len(values) == 1:
            predicted.append(constant[-1])
            continue
        model = LogisticRegression(max_iter=300, C=1.0)
        predicted.append(model.fit(xs, train_y[:, c]).predict(xt))
    return np.stack(predicted, 1), np.stack(constant, 1)


def linear_probe(
    train_x: np.ndarray,
    train_y: np.ndarray,
    test_x: np.ndarray,
    test_y: np.ndarray,
    without: Mapping[str, Sequence[int]] | None = None,
) -> dict:
    """:func:`fit_probe`'s joint and per-component accuracy on the held-out agents, next to the most
    frequent training action's; with ``without`` (a name -> observation columns), also the joint
    accuracy of a probe fit with those columns removed (``linear_probe_without``): what it loses
    without them (what another part of the observation also holds is not lost)."""
    predicted, constant = fit_probe(train_x, train_y, test_x)
    hits = predicted == test_y
    out = {
        "linear_probe_accuracy": float(hits.all(1).mean()),
        "linear_probe_component_accuracy": [float(v) for v in hits.mean(0)],
        "constant_baseline_accuracy": float((constant == test_y).all(1).mean()),
    }
    if without:
        out["linear_probe_without"] = {
            name: joint_accuracy(np.delete(train_x, cols, 1), train_y, np.delete(test_x, cols, 1), test_y)
            for name, cols in without.items()
        }
    return out


def joint_accuracy(train_x: np.ndarray, train_y: np.ndarray, test_x: np.ndarray, test_y: np.ndarray) -> float:
    """The share of test rows whose every action component a probe fit on the training rows gets right."""
    return float((fit_probe(train_x, train_y, test_x)[0] == test_y).all(1).mean())
