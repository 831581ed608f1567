"""`revati doctor`: check that emulated GPUs report their hardware spec, or check a spec on a
real GPU.

    revati doctor --hardware h200_sxm --gpus 2    # the emulator, in a child process
    revati doctor --hardware h200_sxm --real      # this machine's real GPU vs the spec
    revati doctor --hardware h200_sxm --measured revati/conf/hardware/h200_sxm.measured.json
                                                  # a real GPU's dump (revati.profile.devinfo)

Both run revati.device.probe and compare what the driver and NVML report with the spec:
name, memory, every device attribute, and (emulator) NVML/driver agreement and the time a
synchronisation takes after launches of a fixed predicted duration.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from revati.bench import network
from revati.device.env import LIBRARY_NAMES, apply_env, emulated_device_env
from revati.device.spec import HardwareSpec, UnknownHardwareError, load_spec
from revati.engines import versions
from revati.timewarp.runner import NOTICES

TIMING_LAUNCHES = 100
TIMING_NS = 1_000_000


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("doctor", help="check emulated GPUs (or a spec on a real GPU)",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--hardware", default="h200_sxm",
                   help="hardware spec (revati/conf/hardware/*.yaml)")
    p.add_argument("--gpus", type=int, default=1, help="emulated GPUs (emulator mode)")
    p.add_argument("--real", action="store_true",
                   help="probe this machine's real GPU instead of the emulator")
    p.add_argument("--measured", type=Path, metavar="JSON",
                   help="compare the spec with a real GPU's dump from revati.profile.devinfo")
    p.add_argument("--json", action="store_true", help="print the checks as JSON")
    p.add_argument("--last-run", action="store_true",
                   help="only list what the shim noticed in the last `revati run`/`bench` "
                   "(unimplemented entry points called, values it does not support)")
    p.set_defaults(func=main)


def run_probe(env: dict[str, str], timing: bool) -> dict:
    cmd = [sys.executable, "-m", "revati.device.probe"]
    if timing:  # the emulator
        cmd += ["--timing", str(TIMING_LAUNCHES), "--interception"]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    if proc.returncode != 0:
        raise RuntimeError(f"probe failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def report_from_devinfo(path: Path) -> dict:
    """A probe report from revati.profile.devinfo's dump of a real GPU."""
    raw = json.loads(path.read_text())
    api = raw["driver_api"]
    attrs = {name.removeprefix("CU_DEVICE_ATTRIBUTE_"): v.get("value")
             for name, v in api["cuDeviceGetAttribute"].items()}
    nvml = raw.get("nvml", {})
    return {"driver_version": api["cuDriverGetVersion"], "devices": [
        {"name": api["cuDeviceGetName"], "total_memory": api["cuDeviceTotalMem"],
         "nvml_total_memory": nvml.get("memory", {}).get("total"), "attributes": attrs}]}


def compare(spec: HardwareSpec, report: dict, gpus: int | None,
            real: bool = False) -> list[tuple[str, bool, str]]:
    """(check, passed, detail) for every figure the spec fixes. A real GPU is expected to
    differ from the spec exactly where spec.emulated_differences says."""
    checks: list[tuple[str, bool, str]] = []
    devices = report["devices"]
    if gpus is not None:
        checks.append(("device count", len(devices) == gpus, f"{len(devices)} (want {gpus})"))
    expected = spec.device_attributes()
    if real:
        expected.update(spec.emulated_differences)
    for i, dev in enumerate(devices):
        checks.append((f"GPU{i} name", dev["name"] == spec.name, repr(dev["name"])))
        checks.append((f"GPU{i} memory", dev["total_memory"] == spec.memory_bytes,
                       f"{dev['total_memory']} (spec {spec.memory_bytes})"))
        if dev.get("nvml_total_memory") is not None:
            nvml_total = dev["nvml_total_memory"]
            checks.append((f"GPU{i} NVML memory", nvml_total == spec.nvml_memory_bytes,
                           f"{nvml_total} (spec {spec.nvml_memory_bytes})"))
        wrong = {name: (dev["attributes"].get(name), want) for name, want in expected.items()
                 if dev["attributes"].get(name) != want}
        checks.append((f"GPU{i} attributes", not wrong,
                       f"all {len(expected)} equal" if not wrong else
                       ", ".join(f"{k}={got} (spec {want})" for k, (got, want) in wrong.items())))
    # Attributes newer than the driver's CUDA version are refused by real drivers too.
    refused = sorted(name for name, value in devices[0]["attributes"].items()
                     if value is None and name not in expected) if devices else []
    if refused:
        checks.append(("attributes outside the spec (refused, as by a CUDA "
                       f"{report['driver_version'] // 1000}.{report['driver_version'] % 1000 // 10}"
                       " driver)", True, ", ".join(refused)))
    if "nvml" in report and gpus is not None:
        visible = {d["uuid"] for d in devices}
        nvml = {g["uuid"]: g for g in report["nvml"]}
        checks.append(("NVML lists every driver device", visible <= set(nvml), f"{len(nvml)} GPUs"))
        same_bus = all(nvml[d["uuid"]]["pci_bus_id"] == d["pci_bus_id"]
                       for d in devices if d["uuid"] in nvml)
        checks.append(("NVML and driver agree on PCI bus ids", same_bus, ""))
        totals = {g["memory_total"] for g in report["nvml"]}
        checks.append(("NVML memory", totals == {spec.nvml_memory_bytes}, f"{sorted(totals)}"))
    elif "nvml_error" in report:
        checks.append(("NVML", False, report["nvml_error"]))
    if "interception" in report:
        got = report["interception"]
        for lib, names in LIBRARY_NAMES.items():
            checks.append((f"intercepted {'/'.join(names)}", lib in got["loaded"],
                           lib if lib in got["loaded"] else f"{lib} not loaded"))
        if got["cuda_entry_points"]:
            done, total = got["cuda_entry_points"]
            checks.append(("CUDA driver entry points", done > 0,
                           f"{done} of {total} implemented; the other {total - done} log their "
                           "name and return an error (revati doctor --last-run lists those hit)"))
    if "timing" in report:
        t = report["timing"]
        want = t["launches"] * TIMING_NS / 1e9
        ok = want <= t["synchronized_s"] < want + 0.05 and t["queued_s"] < want / 2
        checks.append(("synchronize waits for queued kernels", ok,
                       f"{t['synchronized_s'] * 1e3:.1f} ms for {t['launches']} x "
                       f"{TIMING_NS / 1e6:g} ms (queued in {t['queued_s'] * 1e3:.1f} ms)"))
    return checks


def last_run_notices() -> list[str]:
    """Distinct notices of the last run: 'what: name (in N processes)'."""
    if not NOTICES.exists():
        return []
    seen: dict[tuple[str, str], set[str]] = {}
    for line in NOTICES.read_text(errors="replace").splitlines():
        pid, what, name = (line.split("\t") + ["", ""])[:3]
        seen.setdefault((what, name), set()).add(pid)
    return [f"{what}: {name} (in {len(pids)} process{'es' if len(pids) > 1 else ''})"
            for (what, name), pids in sorted(seen.items())]


def main(args: argparse.Namespace) -> int:
    if args.last_run:
        notices = last_run_notices()
        print(f"revati doctor: the last run ({NOTICES}) hit "
              f"{len(notices) or 'no'} unimplemented or unsupported thing(s)")
        for n in notices:
            print(f"  {n}")
        return 0
    try:
        spec = load_spec(args.hardware)
    except UnknownHardwareError as e:
        print(f"revati doctor: {e}", file=sys.stderr)
        return 1
    if args.measured:
        checks = compare(spec, report_from_devinfo(args.measured), gpus=None, real=True)
    elif args.real:
        report = run_probe(dict(os.environ), timing=False)
        checks = compare(spec, report, gpus=None, real=True)
    else:
        with tempfile.TemporaryDirectory(prefix="revati-doctor-") as work:
            base = {k: v for k, v in os.environ.items() if k != "CUDA_VISIBLE_DEVICES"}
            env = apply_env(base, emulated_device_env(args.hardware, args.gpus, Path(work)))
            env["REVATI_PREDICT_FIXED_NS"] = str(TIMING_NS)
            report = run_probe(env, timing=True)
        checks = compare(spec, report, gpus=args.gpus)
        # informational: both keep a deployment's ports on loopback
        checks.append(("deployment network", True, network.available()))
        checks.append(("engine releases", True, versions.summary()))
    if args.json:
        print(json.dumps([{"check": c, "ok": ok, "detail": d} for c, ok, d in checks], indent=1))
    else:
        mode = (str(args.measured) if args.measured else "real GPU" if args.real
                else f"{args.gpus} emulated GPU(s)")
        print(f"revati doctor: {spec.key} ({spec.name}, measured: {spec.measured}) on {mode}")
        for check, ok, detail in checks:
            print(f"  [{'ok' if ok else 'FAIL'}] {check}: {detail}")
    return 0 if all(ok for _, ok, _ in checks) else 1
