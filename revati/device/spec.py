"""Hardware specs of emulated GPUs: loading, validation, and the flat file the shim reads.

A spec is one YAML file in revati/conf/hardware/ (a Hydra config group, so `hardware=h200_sxm`
selects it in the tuner too). The native shim cannot parse YAML, so `write_flat` turns a
spec into "key value" lines (REVATI_HW_SPEC points at that file). Every figure has one
source: the device attributes that restate a top-level field (SM count, clocks, L2, shared
memory limits, compute capability) are derived here, never written twice in the YAML.
"""

from __future__ import annotations

import dataclasses
import math
import pathlib
from collections.abc import Mapping
from typing import Any

import yaml

from revati import CONF_DIR as _CONF

CONF_DIR = _CONF / "hardware"

# Keys of `peak_flops`, in the order the predictor's roofline reads them.
DTYPES = ("fp32", "tf32", "fp16", "bf16", "fp8")

# Device attributes computed from top-level fields: name -> function of the spec.
_DERIVED_ATTRIBUTES = {
    "MULTIPROCESSOR_COUNT": lambda s: s.sm_count,
    "CLOCK_RATE": lambda s: s.clock_khz,
    "MEMORY_CLOCK_RATE": lambda s: s.memory_clock_khz,
    "GLOBAL_MEMORY_BUS_WIDTH": lambda s: s.memory_bus_width,
    "L2_CACHE_SIZE": lambda s: s.l2_bytes,
    "COMPUTE_CAPABILITY_MAJOR": lambda s: s.compute_capability[0],
    "COMPUTE_CAPABILITY_MINOR": lambda s: s.compute_capability[1],
    "MAX_SHARED_MEMORY_PER_BLOCK": lambda s: s.shared_memory["per_block"],
    "MAX_SHARED_MEMORY_PER_BLOCK_OPTIN": lambda s: s.shared_memory["per_block_optin"],
    "MAX_SHARED_MEMORY_PER_MULTIPROCESSOR": lambda s: s.shared_memory["per_sm"],
    "RESERVED_SHARED_MEMORY_PER_BLOCK": lambda s: s.shared_memory["reserved_per_block"],
    "GPU_PCI_DEVICE_ID": lambda s: s.pci_device_id,
    "GPU_PCI_SUBSYSTEM_ID": lambda s: s.pci_subsystem_id,
}
# Per-device attributes the shim computes itself (they differ between the GPUs of a node).
PER_DEVICE_ATTRIBUTES = ("PCI_BUS_ID", "PCI_DEVICE_ID", "PCI_DOMAIN_ID", "MULTI_GPU_BOARD_GROUP_ID")


class UnknownHardwareError(ValueError):
    """A hardware name with no spec in revati/conf/hardware/."""


class SpecError(ValueError):
    """A spec file that is missing a field or holds an invalid value."""


@dataclasses.dataclass(frozen=True)
class HardwareSpec:
    key: str                      # file stem, e.g. "h200_sxm"
    name: str                     # what NVML and cudaGetDeviceProperties report
    measured: bool
    compute_capability: tuple[int, int]
    sm_count: int
    memory_bytes: int
    context_reserved_bytes: int   # what a CUDA context takes from free memory
    nvml_memory_bytes: int        # NVML's total, which includes the driver's reserve
    clock_khz: int
    memory_clock_khz: int
    memory_bus_width: int
    l2_bytes: int
    shared_memory: Mapping[str, int]
    peak_flops: Mapping[str, float]
    hbm_bytes_per_s: float
    nvlink_bytes_per_s: float
    nvlink_links: int
    pcie_bytes_per_s: float
    pcie_generation: int
    pcie_link_width: int
    launch_overhead_ns: int
    price_per_gpu_hour_usd: float
    power_limit_mw: int
    pci_device_id: int
    pci_subsystem_id: int
    architecture: str
    gpus_per_node: int
    interconnect: str
    pci_bus_ids: tuple[int, ...]
    attributes: Mapping[str, int]
    # attribute -> what the real GPU reports where the emulator deliberately differs
    emulated_differences: Mapping[str, int]
    # How compute-bound work slows down once the GPU runs at its power limit (DESIGN 1.3,
    # docs/predictor.md "Sustained load"): keys POWER_KEYS; None: not modelled
    sustained_power: Mapping[str, float] | None = None
    # The GPU node's host CPU: `python -m revati.hostspeed` measured there (ms per repetition;
    # None: not measured): CPU work counts at the node's speed (docs/timewarp.md, "One rate
    # for CPU work")
    host_cpu_ms: float | None = None
    # The same node's PyTorch operator dispatch (`python -m revati.hostspeed --workload
    # torch` there): `revati bench` makes GPU-driving threads pay what that dispatch adds
    # beyond the Python workload's speed (REVATI_CPU_DILATION, docs/timewarp.md); None: not
    # measured, no dilation
    host_torch_ms: float | None = None
    # How many launches (kernels, copies, memsets, graphs) a stream holds before the next
    # launch call blocks its thread until the GPU has started the oldest of them (measured:
    # tools/calibrate/launch_queue_h200.py); None: unbounded
    launch_queue: int | None = None
    # Collective durations t = alpha + wire bytes / bus bandwidth: collective (COLLECTIVE_OPS)
    # -> rank count -> (alpha_us, busbw_gbps); what the predictor gives collectives and vLLM's
    # custom all-reduce that no model covers (revati/predict/data/collectives/README.md);
    # None: the NVLink roofline
    collectives: Mapping[str, Mapping[int, tuple[float, float]]] | None = None
    # whether that table was measured on this GPU's nodes (True) or fitted to published
    # figures of similar ones (False; summary.json says which)
    collectives_measured: bool = False

    def device_attributes(self) -> dict[str, int]:
        """Every CU_DEVICE_ATTRIBUTE_* value common to all GPUs of this kind."""
        return {**self.attributes, **{k: int(f(self)) for k, f in _DERIVED_ATTRIBUTES.items()}}


def known_hardware(conf_dir: pathlib.Path = CONF_DIR) -> list[str]:
    return sorted(p.stem for p in conf_dir.glob("*.yaml"))


def resolve_hardware(name: str, conf_dir: pathlib.Path = CONF_DIR) -> str:
    """The revati/conf/hardware name that `name` means: itself, or the one name it is the part of
    before the form factor (h200 -> h200_sxm). Every hardware name is resolved here."""
    known = known_hardware(conf_dir)
    if name in known:
        return name
    matches = [k for k in known if k.startswith(name + "_")]
    if len(matches) == 1:
        return matches[0]
    raise UnknownHardwareError(f"unknown hardware {name!r}; known: {', '.join(known) or '(none)'}")


def gpu_family(name: str) -> str:
    """The GPU without its form factor (h200_sxm -> h200): what the predictor's profiles and
    models are filed under."""
    return resolve_hardware(name).split("_")[0]


def load_spec(hardware: str, conf_dir: pathlib.Path = CONF_DIR) -> HardwareSpec:
    key = resolve_hardware(hardware, conf_dir)
    path = conf_dir / f"{key}.yaml"
    raw = yaml.safe_load(path.read_text())
    if not isinstance(raw, dict):
        raise SpecError(f"{path}: not a mapping")
    return _from_dict(key, raw, path)


def _need(raw: Mapping[str, Any], key: str, path: pathlib.Path) -> Any:
    if key not in raw:
        raise SpecError(f"{path}: missing field {key!r}")
    return raw[key]


def _positive(value: Any, what: str, path: pathlib.Path, kind: type = int) -> Any:
    try:
        v = kind(float(value)) if kind is int and isinstance(value, str) else kind(value)
    except (TypeError, ValueError):
        raise SpecError(f"{path}: {what} is not a number: {value!r}") from None
    if not (isinstance(v, int | float) and math.isfinite(v) and v > 0):
        raise SpecError(f"{path}: {what} must be positive, got {value!r}")
    return v


def _from_dict(key: str, raw: Mapping[str, Any], path: pathlib.Path) -> HardwareSpec:
    def num(field: str, kind: type = int) -> Any:
        return _positive(_need(raw, field, path), field, path, kind)

    cc = _need(raw, "compute_capability", path)
    if not (isinstance(cc, list) and len(cc) == 2 and all(isinstance(x, int) for x in cc)):
        raise SpecError(f"{path}: compute_capability must be [major, minor]")
    flops = _need(raw, "peak_flops", path)
    missing = [d for d in DTYPES if d not in flops]
    if missing:
        raise SpecError(f"{path}: peak_flops lacks {', '.join(missing)}")
    shared = _need(raw, "shared_memory", path)
    for k in ("per_block", "per_block_optin", "per_sm", "reserved_per_block"):
        _positive(_need(shared, k, path), f"shared_memory.{k}", path)
    topo = _need(raw, "topology", path)
    bus_ids = tuple(int(b) for b in _need(topo, "pci_bus_ids", path))
    gpus_per_node = _positive(_need(topo, "gpus_per_node", path), "gpus_per_node", path)
    if len(bus_ids) != gpus_per_node or len(set(bus_ids)) != len(bus_ids):
        raise SpecError(f"{path}: topology.pci_bus_ids needs {gpus_per_node} distinct ids")
    attributes = {str(k): int(v) for k, v in (_need(raw, "attributes", path) or {}).items()}
    clash = sorted(set(attributes) & (set(_DERIVED_ATTRIBUTES) | set(PER_DEVICE_ATTRIBUTES)))
    if clash:
        raise SpecError(f"{path}: attributes {clash} are derived; set the top-level field")
    measured = _need(raw, "measured", path)
    if not isinstance(measured, bool):
        raise SpecError(f"{path}: measured must be true or false")
    return HardwareSpec(
        key=key,
        name=str(_need(raw, "name", path)),
        measured=measured,
        compute_capability=(cc[0], cc[1]),
        sm_count=num("sm_count"),
        memory_bytes=num("memory_bytes"),
        context_reserved_bytes=num("context_reserved_bytes"),
        nvml_memory_bytes=num("nvml_memory_bytes"),
        clock_khz=num("clock_khz"),
        memory_clock_khz=num("memory_clock_khz"),
        memory_bus_width=num("memory_bus_width"),
        l2_bytes=num("l2_bytes"),
        shared_memory={k: int(v) for k, v in shared.items()},
        peak_flops={d: _positive(flops[d], f"peak_flops.{d}", path, float) for d in DTYPES},
        hbm_bytes_per_s=num("hbm_bytes_per_s", float),
        nvlink_bytes_per_s=num("nvlink_bytes_per_s", float),
        nvlink_links=num("nvlink_links"),
        pcie_bytes_per_s=num("pcie_bytes_per_s", float),
        pcie_generation=num("pcie_generation"),
        pcie_link_width=num("pcie_link_width"),
        launch_overhead_ns=num("launch_overhead_ns"),
        price_per_gpu_hour_usd=num("price_per_gpu_hour_usd", float),
        power_limit_mw=num("power_limit_mw"),
        pci_device_id=num("pci_device_id"),
        pci_subsystem_id=num("pci_subsystem_id"),
        architecture=str(_need(raw, "architecture", path)),
        gpus_per_node=gpus_per_node,
        interconnect=str(_need(topo, "interconnect", path)),
        pci_bus_ids=bus_ids,
        attributes=attributes,
        emulated_differences={str(k): int(v) for k, v in
                              (raw.get("emulated_differences") or {}).items()},
        sustained_power=_sustained_power(raw.get("sustained_power"), path),
        host_cpu_ms=_optional_positive(raw, "host_cpu_ms", path),
        host_torch_ms=_optional_positive(raw, "host_torch_ms", path),
        launch_queue=None if raw.get("launch_queue") is None else num("launch_queue"),
        collectives=_collectives(raw.get("collectives"), path),
        collectives_measured=bool((raw.get("collectives") or {}).get("measured", False)),
    )


def _optional_positive(raw: Mapping[str, Any], key: str, path: pathlib.Path) -> float | None:
    return None if raw.get(key) is None else _positive(raw[key], key, path, float)


POWER_KEYS = ("gemm_slowdown", "attention_slowdown", "time_constant_ms", "throttle_onset",
              "throttle_full")
# What memory-bound kernels draw (idle 0, compute-bound work 1): optional, 0 when not measured
MEMORY_LOAD = "memory_load"


def _sustained_power(raw: Any, path: pathlib.Path) -> dict[str, float] | None:
    if raw is None:
        return None
    if not isinstance(raw, Mapping) or set(raw) - {*POWER_KEYS, MEMORY_LOAD, "measured"}:
        raise SpecError(f"{path}: sustained_power takes {', '.join(POWER_KEYS)} "
                        f"and optionally {MEMORY_LOAD}")
    out = {k: _positive(_need(raw, k, path), f"sustained_power.{k}", path, float)
           for k in POWER_KEYS}
    memory = raw.get(MEMORY_LOAD, 0.0)
    if not isinstance(memory, int | float) or isinstance(memory, bool) or not 0 <= memory < 1:
        raise SpecError(f"{path}: sustained_power.{MEMORY_LOAD} is a power load in [0, 1)")
    out[MEMORY_LOAD] = float(memory)
    if out["gemm_slowdown"] < 1 or out["attention_slowdown"] < 1:
        raise SpecError(f"{path}: sustained_power slowdowns are factors >= 1")
    if not out["throttle_onset"] < out["throttle_full"] <= 1:
        raise SpecError(f"{path}: sustained_power needs throttle_onset < throttle_full <= 1")
    return out


# Collectives of the `collectives` table, mirrored by coll_table_names in
# native/predict/roofline.c. send/recv is one pair of GPUs whatever the communicator's size.
COLLECTIVE_OPS = ("allreduce", "allgather", "reducescatter", "broadcast", "sendrecv",
                  "custom_allreduce_1stage", "custom_allreduce_2stage")
MAX_COLLECTIVE_RANKS = 8  # the predictor's table holds 2..8 ranks (one NVSwitch node)


def _collectives(raw: Any,
                 path: pathlib.Path) -> dict[str, dict[int, tuple[float, float]]] | None:
    if raw is None:
        return None
    if not isinstance(raw, Mapping) or set(raw) - {*COLLECTIVE_OPS, "measured"}:
        raise SpecError(f"{path}: collectives takes {', '.join(COLLECTIVE_OPS)}")
    out: dict[str, dict[int, tuple[float, float]]] = {}
    for op in COLLECTIVE_OPS:
        table = raw.get(op) or {}
        if not isinstance(table, Mapping):
            raise SpecError(f"{path}: collectives.{op} must map rank counts to entries")
        for n, value in table.items():
            what = f"collectives.{op}.{n}"
            if not (isinstance(n, int) and 2 <= n <= MAX_COLLECTIVE_RANKS):
                raise SpecError(f"{path}: {what}: ranks must be 2..{MAX_COLLECTIVE_RANKS}")
            if not (isinstance(value, list) and len(value) == 2):
                raise SpecError(f"{path}: {what} must be [alpha_us, busbw_gbps]")
            try:
                alpha = float(value[0])
            except (TypeError, ValueError):
                alpha = math.nan
            if not (math.isfinite(alpha) and alpha >= 0):
                raise SpecError(f"{path}: {what}: alpha_us must be >= 0, got {value[0]!r}")
            out.setdefault(op, {})[n] = (alpha, _positive(value[1], what, path, float))
    return out


def flat_lines(spec: HardwareSpec) -> list[str]:
    """The "key value" lines of the shim's spec file (the C side reads these names)."""
    scalar = {
        "name": spec.name,
        "sm_count": spec.sm_count,
        "memory_bytes": spec.memory_bytes,
        "context_reserved_bytes": spec.context_reserved_bytes,
        "nvml_memory_bytes": spec.nvml_memory_bytes,
        **{f"peak_flops.{d}": repr(float(spec.peak_flops[d])) for d in DTYPES},
        "hbm_bytes_per_s": repr(float(spec.hbm_bytes_per_s)),
        "nvlink_bytes_per_s": repr(float(spec.nvlink_bytes_per_s)),
        "pcie_bytes_per_s": repr(float(spec.pcie_bytes_per_s)),
        "launch_overhead_ns": spec.launch_overhead_ns,
        "cc_major": spec.compute_capability[0],
        "cc_minor": spec.compute_capability[1],
        "clock_khz": spec.clock_khz,
        "memory_clock_khz": spec.memory_clock_khz,
        "memory_bus_width": spec.memory_bus_width,
        "l2_bytes": spec.l2_bytes,
        "nvlink_links": spec.nvlink_links,
        "pcie_generation": spec.pcie_generation,
        "pcie_link_width": spec.pcie_link_width,
        "power_limit_mw": spec.power_limit_mw,
        "pci_device_id": spec.pci_device_id,
        "pci_subsystem_id": spec.pci_subsystem_id,
        "architecture": spec.architecture,
        "gpus_per_node": spec.gpus_per_node,
    }
    lines = [f"{k} {v}" for k, v in scalar.items()]
    lines += [f"pci_bus_id.{i} {b}" for i, b in enumerate(spec.pci_bus_ids)]
    lines += [f"attr.{k} {v}" for k, v in sorted(spec.device_attributes().items())]
    if spec.sustained_power:
        lines += [f"power.{k} {v!r}" for k, v in spec.sustained_power.items()]
    if spec.launch_queue:
        lines.append(f"launch_queue {spec.launch_queue}")
    for op, table in (spec.collectives or {}).items():
        lines += [f"collective.{op}.{n} {a!r} {b!r}" for n, (a, b) in sorted(table.items())]
    return lines


def write_flat(spec: HardwareSpec, path: pathlib.Path) -> pathlib.Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(flat_lines(spec)) + "\n")
    return path
