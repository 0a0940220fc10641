"""Detection metrics of seed 003 §VI (as sklearn computes them in the authors' code):
Prec = TP/(TP+FP), Rec = TP/(TP+FN), BAcc = ½(TP/(TP+FN) + TN/(TN+FP)); an undefined ratio is 0
(sklearn's ``zero_division`` default), and BAcc averages only the classes present in y_true."""

from __future__ import annotations

import numpy as np


def confusion(y_true: np.ndarray, y_pred: np.ndarray) -> tuple[int, int, int, int]:
    """(TP, FP, TN, FN) for labels in {0, 1}."""
    t = np.asarray(y_true).astype(bool)
    p = np.asarray(y_pred).astype(bool)
    if t.shape != p.shape:
        raise ValueError(f"y_true and y_pred differ in shape: {t.shape} vs {p.shape}")
    return int(np.sum(t & p)), int(np.sum(~t & p)), int(np.sum(~t & ~p)), int(np.sum(t & ~p))


def detection_scores(y_true: np.ndarray, y_pred: np.ndarray) -> dict[str, float]:
    tp, fp, tn, fn = confusion(y_true, y_pred)
    prec = tp / (tp + fp) if tp + fp else 0.0
    rec = tp / (tp + fn) if tp + fn else 0.0
    recalls = []
    if tp + fn:
        recalls.append(tp / (tp + fn))
    if tn + fp:
        recalls.append(tn / (tn + fp))
    bacc = float(np.mean(recalls)) if recalls else 0.0
    return {"bacc": float(bacc), "prec": float(prec), "rec": float(rec)}
