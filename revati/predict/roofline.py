"""The roofline's view of a GPU's spec, and the roofline fallback computed from it.

The roofline itself lives in native/predict/roofline.c (rv_roofline_ns) and is called from here
through ctypes, so the emulator and every Python report compute the same number.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from revati.predict.features import roofline_ns, spec_keys


@dataclass(frozen=True)
class RooflineSpec:
    """The figures of a hardware spec that the roofline and the C predictor read (the
    keys of spec_keys()), as a hardware profile stores them; the emulated device's whole
    spec is revati.device.spec.HardwareSpec."""

    name: str
    values: dict[str, float]  # every key of spec_keys()

    @classmethod
    def from_mapping(cls, data: Mapping[str, object]) -> RooflineSpec:
        """From a YAML-style mapping; nested groups (peak_flops: {bf16: ...}) or dotted keys."""
        flat: dict[str, object] = {}
        for key, value in data.items():
            if isinstance(value, Mapping):
                flat.update({f"{key}.{k}": v for k, v in value.items()})
            else:
                flat[key] = value
        missing = [k for k in ["name", *spec_keys()] if k not in flat]
        if missing:
            raise ValueError(f"hardware spec lacks {missing}")
        return cls(str(flat["name"]), {k: float(flat[k]) for k in spec_keys()})

    @classmethod
    def from_flat_file(cls, path: str | Path) -> RooflineSpec:
        """From the "key value" file the C predictor reads (REVATI_HW_SPEC)."""
        data: dict[str, object] = {}
        for line in Path(path).read_text().splitlines():
            parts = line.split(None, 1)
            if len(parts) == 2 and not parts[0].startswith("#"):
                data[parts[0]] = parts[1].strip()
        return cls.from_mapping(data)

    def vector(self) -> list[float]:
        return [self.values[k] for k in spec_keys()]

    def flat_text(self) -> str:
        lines = [f"name {self.name.replace(' ', '_')}"]
        lines += [f"{k} {self.values[k]:.17g}" for k in spec_keys()]
        return "\n".join(lines) + "\n"

    def as_mapping(self) -> dict[str, object]:
        out: dict[str, object] = {"name": self.name}
        for key, value in self.values.items():
            group, _, sub = key.partition(".")
            if sub:
                out.setdefault(group, {})[sub] = value  # type: ignore[union-attr]
            else:
                out[key] = value
        return out

    def roofline_ns(self, launch: Mapping[str, object]) -> int:
        return roofline_ns(launch, self.vector())
