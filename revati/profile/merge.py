"""Merge hardware profiles of one GPU taken in several runs (e.g. one lease per sweep group),
and add the rows of a sweep script that measured outside `revati profile micro` (vLLM's FA3 and
fused-MoE kernels, tools/profile/profile_*.py) to a profile."""

from __future__ import annotations

import datetime
import gzip
import json
from pathlib import Path

import pandas as pd

from revati.predict.hwprofile import HardwareProfile, read_profile
from revati.predict.roofline import RooflineSpec
from revati.profile.micro import derived_spec


def merge(inputs: list[Path], out: Path) -> HardwareProfile:
    parts = [read_profile(p) for p in inputs]
    gpus = {str(p.provenance.get("gpu")) for p in parts}
    if len(gpus) != 1:
        raise ValueError(f"profiles of different GPUs cannot be merged: {sorted(gpus)}")
    frames, offset = [], 0
    for p in parts:
        df = p.launches.copy()
        df["point"] += offset  # point ids stay unique: the trainer splits by point
        offset = int(df["point"].max()) + 1
        frames.append(df)
    launches = pd.concat(frames, ignore_index=True)
    prov = dict(parts[0].provenance)
    prov["merged_from"] = [p.provenance for p in parts]
    prov["points"] = sum(int(p.provenance.get("points", 0)) for p in parts)
    prov["skipped"] = [s for p in parts for s in p.provenance.get("skipped", [])]
    spec, measured = derived_spec(prov, launches)
    e2e = next((p.e2e_kernels for p in parts if p.e2e_kernels is not None), None)
    mixed = next((p.mixed_attention for p in parts if p.mixed_attention is not None), None)
    profile = HardwareProfile(RooflineSpec.from_mapping(spec), prov, launches, measured, e2e,
                              mixed)
    profile.write(out)
    return profile


def add_rows(profile_dir: Path, rows_file: Path, meta_file: Path | None = None) -> int:
    """Append a sweep script's rows (JSON lines, gzipped or not, one profile row each, as
    revati.profile.micro.measure returns them) to a profile, with fresh point ids, keeping the
    profile's spec. Rows of the fused-MoE sweep carry the step's tokens and the GEMM's width
    (moe_tokens, moe_n, moe_k): those become the launch columns the emulator fills from the
    kernel's arguments (m = tokens x top-k, n, k). Rows with per-sequence lengths (q_lens,
    kv_lens: attention calls over mixed steps, tools/profile/profile_fa3.py --mixed) go to the
    profile's mixed_attention table instead. Returns the rows added."""
    from revati.predict.features import ATTENTION_COLUMNS, Op
    from revati.predict.features import empty_launch_row as empty

    profile = read_profile(profile_dir)
    opener = gzip.open if rows_file.suffix == ".gz" else open
    with opener(rows_file, "rt") as f:
        rows = [json.loads(line) for line in f if line.strip()]
    for r in rows:
        if r.get("moe_n"):
            r.update(m=r["moe_tokens"] * r["moe_top_k"], n=r["moe_n"], k=r["moe_k"])
        else:
            r.update(moe_experts=0, moe_top_k=0)
        # the neutral launch row: argument sizes unknown (`revati profile args` replays torch
        # programs only)
        for col, value in empty(Op(r["op"])).items():
            r.setdefault(col, value)
        for col in ATTENTION_COLUMNS:  # no attention launch unless the row says so
            r.setdefault(col, 0)
    new = pd.DataFrame(rows)
    if "q_lens" in new.columns:
        table = profile.mixed_attention
        new["point"] += 0 if table is None else int(table["point"].max()) + 1
        profile.mixed_attention = new if table is None else pd.concat([table, new[table.columns]],
                                                                      ignore_index=True)
    else:
        new["point"] += int(profile.launches["point"].max()) + 1
        columns = list(profile.launches.columns)
        profile.launches = pd.concat([profile.launches, new[columns]], ignore_index=True)
    meta = json.loads(meta_file.read_text()) if meta_file else {}
    profile.provenance.setdefault("added_rows", []).append({
        "rows": str(rows_file), "count": len(new), "sweeps": sorted(new.sweep.unique()),
        "date": datetime.datetime.now(datetime.UTC).isoformat(),
        "measured": meta.get("provenance", {})})
    profile.write(profile_dir)
    return len(new)
