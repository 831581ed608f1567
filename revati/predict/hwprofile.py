"""Hardware profile folder: measured launch durations of one GPU model plus its spec.

    DIR/spec.yaml          hardware spec (roofline keys), provenance (GPU, driver, CUDA, torch,
                           date, command), and what was measured on the way
    DIR/launches.parquet   one row per distinct launch of a sweep point: the launch columns of
                           features.LAUNCH_COLUMNS, duration_ns (median over repetitions), and
                           sweep context (sweep, point, attention shape)
    DIR/e2e_kernels.parquet  optional: every kernel of the end-to-end check (profile/e2e.py)
    DIR/mixed_attention.parquet  optional: attention calls over steps that mix decodes with
                           prefill chunks, every kernel of a call with the launch columns,
                           duration_ns, the call (point) and its per-sequence lengths (q_lens,
                           kv_lens, heads, kv_heads, head_dim): the attention_mix model's rows

The kernel-argument columns (features.ARG_COLUMNS) come from an emulated replay of the same
sweeps (`revati profile args`, profile/args.py); -1 where none was matched.

Durations are GPU execution times from CUPTI activity records, launch gaps excluded.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd
import yaml

from revati.predict.features import (
    ARG_COLUMNS,
    ATTENTION_COLUMNS,
    LAUNCH_COLUMNS,
    MOE_COLUMNS,
    UNKNOWN_ARGS,
)
from revati.predict.roofline import RooflineSpec

# Sweep context recorded next to the launch columns. The attention shape is what the
# attention-by-shape models take (docs/predictor.md, "Sequence lengths"), the routing what the
# fused-MoE model takes.
CONTEXT_COLUMNS = ["sweep", "point", "position", "duration_ns", "reps", *ATTENTION_COLUMNS,
                   *MOE_COLUMNS]


@dataclass
class HardwareProfile:
    spec: RooflineSpec
    provenance: dict[str, object]
    launches: pd.DataFrame
    measured: dict[str, object] = field(default_factory=dict)
    e2e_kernels: pd.DataFrame | None = None
    mixed_attention: pd.DataFrame | None = None

    def write(self, out: str | Path) -> Path:
        out = Path(out)
        out.mkdir(parents=True, exist_ok=True)
        doc = {"spec": self.spec.as_mapping(), "provenance": self.provenance,
               "measured": self.measured}
        (out / "spec.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
        self.launches[LAUNCH_COLUMNS + CONTEXT_COLUMNS].to_parquet(
            out / "launches.parquet", index=False, compression="zstd")
        if self.e2e_kernels is not None:
            self.e2e_kernels.to_parquet(out / "e2e_kernels.parquet", index=False,
                                        compression="zstd")
        if self.mixed_attention is not None:
            self.mixed_attention.to_parquet(out / "mixed_attention.parquet", index=False,
                                            compression="zstd")
        return out


def read_profile(path: str | Path) -> HardwareProfile:
    path = Path(path)
    doc = yaml.safe_load((path / "spec.yaml").read_text())
    launches = with_arg_columns(pd.read_parquet(path / "launches.parquet"))
    missing = set(LAUNCH_COLUMNS + CONTEXT_COLUMNS) - set(launches.columns)
    if missing:
        raise ValueError(f"{path}/launches.parquet lacks columns {sorted(missing)}")
    e2e, mixed = path / "e2e_kernels.parquet", path / "mixed_attention.parquet"
    return HardwareProfile(RooflineSpec.from_mapping(doc["spec"]), doc.get("provenance", {}),
                           launches, doc.get("measured", {}),
                           with_arg_columns(pd.read_parquet(e2e)) if e2e.exists() else None,
                           pd.read_parquet(mixed) if mixed.exists() else None)


def with_arg_columns(df: pd.DataFrame) -> pd.DataFrame:
    """df with the kernel-argument columns, unknown (-1) where a real-GPU measurement has not
    been given them by `revati profile args` yet, and the routing columns (0: no MoE launch)
    of profiles measured before there were any."""
    for col in ARG_COLUMNS:
        if col not in df.columns:
            df[col] = UNKNOWN_ARGS
    for col in MOE_COLUMNS:
        if col not in df.columns:
            df[col] = 0
    return df
