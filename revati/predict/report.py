"""`revati predictor report`: the accuracy of a hardware's models, from its report.json."""

from __future__ import annotations

import json
from pathlib import Path

EMULATED_E2E = "e2e_emulated.json"  # `revati predictor e2e --out`, kept beside the models


def load(models: Path) -> dict[str, object]:
    report = json.loads((models / "report.json").read_text())
    if (models / EMULATED_E2E).exists():
        report["e2e_emulated"] = json.loads((models / EMULATED_E2E).read_text())
    return report


def e2e_shares(report: dict[str, object]) -> dict[str, float]:
    """Each family's mean share of measured GPU time over the e2e cases."""
    cases = report.get("e2e", {})
    shares: dict[str, float] = {}
    for case in cases.values():
        for fam, v in case["families"].items():
            shares[fam] = shares.get(fam, 0.0) + v["share_of_measured"] / len(cases)
    return shares


def _draws(e: dict[str, object]) -> str:
    """The spread of a held-out figure over the fold draws (older reports have one draw)."""
    draws = e.get("draws_weighted_mape") or [e["weighted_mape"]]
    return f"{min(draws):5.1%}-{max(draws):5.1%}"


def _family_line(fam: str, e: dict[str, object], share: str) -> str:
    if e["source"] != "model":
        return (f"{fam:18} {'roofline':8} {'-':8} {e['samples']:7d} {'-':>7} {'-':>7} "
                f"{'-':>11} {'-':>7} {e['target_mape']:6.0%} {'-':>3} {'-':>8} {share}")
    ok = "yes" if e["weighted_mape"] <= e["target_mape"] else "NO"
    return (f"{fam:18} {'model':8} {e.get('base', 'roofline'):8} {e['samples']:7d} "
            f"{e['mape']:7.1%} {e['weighted_mape']:7.1%} {_draws(e):>11} {e['p90_ape']:7.1%} "
            f"{e['target_mape']:6.0%} {ok:>3} {e['roofline']['weighted_mape']:8.1%} {share}")


def render(report: dict[str, object]) -> str:
    from revati.predict.families import BY_NAME

    shares = e2e_shares(report)
    prov = report.get("profile_provenance", {})
    repeats = report.get("repeats", 1)
    header = (f"{'family':18} {'source':8} {'base':8} {'samples':>7} {'MAPE':>7} {'wMAPE':>7} "
              f"{'draws':>11} {'p90|e|':>7} {'target':>6} {'ok':>3} {'roofline':>8} "
              f"{'GPU share':>9}")
    lines = [f"hardware: {report['hardware']}   profile: {prov.get('date')}"
             f" torch {prov.get('torch')}"
             f" CUDA {prov.get('cuda')} driver {prov.get('driver')}",
             f"held-out: {report['folds']}-fold cross-validation grouped by sweep point, mean over "
             f"{repeats} random fold draws (draws: the range of wMAPE over them); errors of "
             "predicted vs measured duration; base: what the model corrects (the roofline, or a "
             "line in the log size features); GPU share: mean over the e2e cases",
             "", header]
    launch_only = []
    for fam, e in report["families"].items():
        share = f"{shares[fam]:9.1%}" if fam in shares else f"{'-':>9}"
        if fam in BY_NAME and BY_NAME[fam].launch_only:
            launch_only.append(_family_line(fam, e, share))
        else:
            lines.append(_family_line(fam, e, share))
    if launch_only:
        lines += ["", "launch-only models: kernels of the families above (attention_shape, gemm, "
                      "moe) that arrive without their shape, predicted from grid, block and name "
                      "alone; every run reports the GPU time they predicted (summary.json "
                      "launch_only_share)", header, *launch_only]
    if report.get("groups"):
        lines += ["", "targets by group (held-out, GPU-time weighted MAPE, mean over the draws; "
                      "launch-only models excluded; gemm: cuBLAS and fused-MoE GEMMs):"]
        for group, g in report["groups"].items():
            ok = "yes" if g["weighted_mape"] <= g["target_mape"] else "NO"
            lines.append(f"{group:10} samples {g['samples']:6d}  wMAPE {g['weighted_mape']:6.1%}"
                         f"  draws {_draws(g)}  target {g['target_mape']:4.0%}  {ok}")
    if report.get("e2e"):
        lines += ["", "end-to-end, launch by launch at boost clock (GEMMs as cuBLAS calls, "
                      "attention by shape, the rest by launch; no power state):",
                  f"{'architecture/case':32} {'measured ms':>11} {'predicted ms':>12} {'error':>7} "
                  f"{'fallback':>8}"]
        for case, v in report["e2e"].items():
            lines.append(f"{case:32} {v['measured_ns'] / 1e6:11.3f} {v['predicted_ns'] / 1e6:12.3f}"
                         f" {v['error']:+7.1%} {v['fallback_share_of_predicted']:8.1%}")
    if report.get("e2e_emulated"):
        from revati.predict.emulated_e2e import render as render_emulated

        lines += ["", "end-to-end on the emulated GPU (revati predictor e2e: the same forwards "
                      "run under emulation, power state included):",
                  render_emulated(report["e2e_emulated"])]
    return "\n".join(lines)
