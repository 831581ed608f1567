"""PNG plots of a trial (latency CDFs) and of a sweep (throughput versus latency front)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only: the tuner runs headless
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

LATENCY_COLUMNS = ("ttft_ms", "tpot_ms", "itl_ms", "e2e_ms")


def latency_values(requests: pd.DataFrame, col: str) -> np.ndarray:
    """The sorted values of one latency column of requests.csv. A request's itl_ms cell holds
    the JSON list of its inter-token latencies (revati/bench/results.py), so that column
    gives every token's latency, not one value per request."""
    series = requests[col].dropna()
    if not pd.api.types.is_numeric_dtype(series):
        series = pd.Series([x for cell in series for x in json.loads(cell)], dtype=float)
    return np.sort(series.to_numpy(dtype=float))


def latency_cdf(requests: pd.DataFrame, path: Path) -> Path | None:
    """One empirical CDF per latency column of requests.csv; None if it has none."""
    columns = [c for c in LATENCY_COLUMNS if c in requests.columns]
    if not columns:
        return None
    fig, axes = plt.subplots(1, len(columns), figsize=(4 * len(columns), 3.2), squeeze=False)
    for ax, col in zip(axes[0], columns, strict=True):
        values = latency_values(requests, col)
        ax.step(values, np.arange(1, len(values) + 1) / len(values), where="post")
        ax.set_xlabel(col.replace("_ms", " (ms)"))
        ax.set_ylabel("fraction of tokens" if col == "itl_ms" else "fraction of requests")
        ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def pareto_mask(points: np.ndarray, maximize: Sequence[bool]) -> np.ndarray:
    """True for the points no other point dominates (at least as good everywhere, better once)."""
    signed = points * np.where(maximize, -1.0, 1.0)  # everything to minimise
    mask = np.ones(len(points), dtype=bool)
    for i, p in enumerate(signed):
        dominated = np.all(signed <= p, axis=1) & np.any(signed < p, axis=1)
        mask[i] = not dominated.any()
    return mask


def front_plot(x: np.ndarray, y: np.ndarray, labels: Sequence[str], names: tuple[str, str],
               maximize: tuple[bool, bool], path: Path) -> Path:
    """Scatter of every trial with the Pareto front drawn through the non-dominated ones."""
    mask = pareto_mask(np.column_stack([x, y]), maximize)
    fig, ax = plt.subplots(figsize=(6, 4.5))
    ax.scatter(x[~mask], y[~mask], color="0.6", label="dominated")
    order = np.argsort(x[mask])
    ax.plot(x[mask][order], y[mask][order], "o-", color="C3", label="Pareto front")
    for xi, yi, label, on_front in zip(x, y, labels, mask, strict=True):
        ax.annotate(label, (xi, yi), fontsize=7, xytext=(3, 3), textcoords="offset points",
                    color="black" if on_front else "0.45")
    ax.set_xlabel(f"{names[0]} ({'max' if maximize[0] else 'min'})")
    ax.set_ylabel(f"{names[1]} ({'max' if maximize[1] else 'min'})")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path
