"""`revati predictor e2e`: the e2e forwards (profile/e2e.py) run on an emulated GPU against
what the real GPU measured.

The measured side is the hardware profile's e2e_<arch>.json (sum of CUPTI durations of one
forward); the emulated side runs the very same program under `revati run --hardware`, where
every launch is predicted by the device shim as in an engine run. Printed per case: both GPU
times and the error, and the decode slow-down from KV 1,024 to 8,192 on both sides.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

DECODE_PAIR = ("decode_b64_kv1024", "decode_b64_kv8192")


def run_emulated(hardware: str, archs: list[str]) -> dict[str, dict[str, dict[str, float]]]:
    with tempfile.TemporaryDirectory(prefix="revati-e2e-") as tmp:
        cmd = [sys.executable, "-m", "revati.cli.main", "run", "--hardware", hardware, "--",
               sys.executable, "-m", "revati.profile.e2e", "--emulated", "--out", tmp,
               "--arch", *archs]
        proc = subprocess.run(cmd)
        if proc.returncode != 0:
            raise RuntimeError(f"the emulated forwards failed (exit {proc.returncode})")
        return json.loads((Path(tmp) / "e2e_emulated.json").read_text())


def compare(profile: Path, emulated: dict[str, dict[str, dict[str, float]]]) -> dict:
    """{arch: {case: measured_ns, emulated_ns, error}, arch + " ratio": decode slow-down}."""
    out: dict[str, object] = {}
    for arch, cases in emulated.items():
        measured = json.loads((profile / f"e2e_{arch}.json").read_text())["cases"]
        rows = {case: {"measured_ns": measured[case]["gpu_time_ns"],
                       "emulated_ns": v["gpu_time_ns"],
                       "error": v["gpu_time_ns"] / measured[case]["gpu_time_ns"] - 1,
                       "roofline_share": v["roofline_share"]}
                for case, v in cases.items()}
        lo, hi = (rows[c] for c in DECODE_PAIR)
        m, e = hi["measured_ns"] / lo["measured_ns"], hi["emulated_ns"] / lo["emulated_ns"]
        out[arch] = {"cases": rows, "decode_kv8192_over_kv1024": {
            "measured": m, "emulated": e, "error": e / m - 1}}
    return out


def render(result: dict) -> str:
    lines = [f"{'architecture/case':32} {'measured ms':>11} {'emulated ms':>11} {'error':>7} "
             f"{'roofline':>8}"]
    for arch, r in result.items():
        for case, v in r["cases"].items():
            lines.append(f"{arch + '/' + case:32} {v['measured_ns'] / 1e6:11.3f} "
                         f"{v['emulated_ns'] / 1e6:11.3f} {v['error']:+7.1%} "
                         f"{v['roofline_share']:8.1%}")
        d = r["decode_kv8192_over_kv1024"]
        lines.append(f"{arch + ' decode KV 8192 / 1024':32} {d['measured']:11.3f} "
                     f"{d['emulated']:11.3f} {d['error']:+7.1%}")
    return "\n".join(lines)
