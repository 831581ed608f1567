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


def render(report: dict[str, object]) -> str:
    shares = e2e_shares(report)
    prov = report.get("profile_provenance", {})
    lines = [f"hardware: {report['hardware']}   profile: {prov.get('date')}"
             f" torch {prov.get('torch')}"
             f" CUDA {prov.get('cuda')} driver {prov.get('driver')}",
             f"held-out: {report['folds']}-fold cross-validation grouped by sweep point; errors of "
             "predicted vs measured duration; base: what the model corrects (the roofline, or a "
             "line in the log size features); GPU share: mean over the e2e cases",
             "",
             f"{'family':18} {'source':8} {'base':8} {'samples':>7} {'MAPE':>7} {'wMAPE':>7} "
             f"{'p90|e|':>7} {'target':>6} {'ok':>3} {'roofline':>8} {'GPU share':>9}"]
    for fam, e in report["families"].items():
        share = f"{shares[fam]:9.1%}" if fam in shares else f"{'-':>9}"
        if e["source"] != "model":
            lines.append(f"{fam:18} {'roofline':8} {'-':8} {e['samples']:7d} {'-':>7} {'-':>7} "
                         f"{'-':>7} {e['target_mape']:6.0%} {'-':>3} {'-':>8} {share}")
            continue
        ok = "yes" if e["weighted_mape"] <= e["target_mape"] else "NO"
        lines.append(f"{fam:18} {'model':8} {e.get('base', 'roofline'):8} {e['samples']:7d} "
                     f"{e['mape']:7.1%} {e['weighted_mape']:7.1%} {e['p90_ape']:7.1%} "
                     f"{e['target_mape']:6.0%} {ok:>3} {e['roofline']['weighted_mape']:8.1%} "
                     f"{share}")
    if report.get("groups"):
        lines += ["", "targets by group (held-out, GPU-time weighted MAPE; launch-only attention,"
                      " GEMM and fused-MoE kernels excluded; gemm: cuBLAS and fused-MoE GEMMs):"]
        for group, g in report["groups"].items():
            ok = "yes" if g["weighted_mape"] <= g["target_mape"] else "NO"
            lines.append(f"{group:10} samples {g['samples']:6d}  wMAPE {g['weighted_mape']:6.1%}"
                         f"  target {g['target_mape']:4.0%}  {ok}")
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
