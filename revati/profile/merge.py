"""Merge hardware profiles of one GPU taken in several runs (e.g. one lease per sweep group)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from revati.predict.hwprofile import HardwareProfile, read_profile
from revati.predict.roofline import HardwareSpec
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
    profile = HardwareProfile(HardwareSpec.from_mapping(spec), prov, launches, measured, e2e)
    profile.write(out)
    return profile
