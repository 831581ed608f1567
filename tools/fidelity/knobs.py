"""Does the emulator order scheduler settings as the real GPU does? (issue #25, item 4)

For each scheduler setting and load of validation/vllm/llama3_8b-knobs/2026-12-04-real/ (real
vLLM 0.26.0 on the H200, one fresh server per setting), replays the real run's requests with
`revati validate` on the same setting, then prints, per load, each setting's mean TTFT, mean
TPOT and output throughput, real beside emulated, and whether the two order the settings alike.

    .venv/bin/python tools/fidelity/knobs.py --out OUT [--settings default,mnbt2048,...]
        [--loads heavy,streams40] [--repeat N]

Runs are kept in OUT/<setting>_<load>[_<i>] and reused when their validation.json exists,
so an interrupted run resumes. Each takes a few minutes on 2 cores (engine start included).
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

from replay import METRICS, VLLM_KNOBS, replay, run_folders

REAL = VLLM_KNOBS
SETTINGS = ("default", "mnbt2048", "mnbt4096", "mnbt16384", "seqs64", "seqs32")
LOADS = ("heavy", "streams40")


def engine_flags(setting: str) -> list[str]:
    """The server flags of a setting, as tools/device/real_engine.sh's config_flags."""
    if setting == "default":
        return []
    if setting.startswith("mnbt"):
        return ["--max-num-batched-tokens", setting[4:]]
    if setting.startswith("seqs"):
        return ["--max-num-seqs", setting[4:]]
    raise SystemExit(f"unknown setting {setting!r} (known: {', '.join(SETTINGS)})")


def run(setting: str, load: str, out: Path) -> dict[str, tuple[float, float]]:
    """metric -> (real, emulated) for one setting and load, running it unless kept."""
    return replay(REAL / f"{setting}_{load}.json.gz", out, engine_args=engine_flags(setting))


def order(values: dict[str, float]) -> list[str]:
    return sorted(values, key=values.__getitem__)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--settings", default=",".join(SETTINGS))
    p.add_argument("--loads", default=",".join(LOADS))
    p.add_argument("--repeat", type=int, default=1, help="emulated runs per cell (median)")
    args = p.parse_args()
    settings, loads = args.settings.split(","), args.loads.split(",")
    for load in loads:
        cells = {}
        for s in settings:
            runs = [run(s, load, out) for out in run_folders(args.out, f"{s}_{load}", args.repeat)]
            cells[s] = {m: (runs[0][m][0], statistics.median(r[m][1] for r in runs))
                        for m, _ in METRICS}
        print(f"\n## {load}\n\n| setting | " + " | ".join(
            f"{label} real | emulated | error" for _, label in METRICS) + " |")
        print("|---|" + "---:|" * 3 * len(METRICS))
        for s, c in cells.items():
            print(f"| {s} | " + " | ".join(
                f"{c[m][0]:.2f} | {c[m][1]:.2f} | {(c[m][1] / c[m][0] - 1) * 100:+.1f} %"
                for m, _ in METRICS) + " |")
        for m, label in METRICS:
            real = order({s: c[m][0] for s, c in cells.items()})
            emulated = order({s: c[m][1] for s, c in cells.items()})
            print(f"\n{label}, ascending: real {' < '.join(real)}; emulated "
                  f"{' < '.join(emulated)}: {'same order' if real == emulated else 'DIFFERENT'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
