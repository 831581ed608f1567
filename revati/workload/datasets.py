"""Workloads beyond vLLM's random dataset, fed to the unmodified `vllm bench serve`.

Both are written as a JSONL file for vLLM's `timed_trace` dataset (one request per line:
timestamp, input_length, output_length, hash_ids), so the load generator, its prompts of
exact token counts and its metric definitions stay vLLM's own:

- `sharegpt`: (input, output) length pairs drawn, seeded, from the ShareGPT distribution
  shipped in data/sharegpt_lengths.csv (see data/README.md) that fit the engine's
  context; arrivals come from vLLM's own arrival process (--request-rate, --burstiness),
  as for the random dataset.
- `trace`: a timestamped trace (CSV or JSONL of arrival time, input and output length),
  the user's or one shipped in data/, replayed at its own arrival times.

vLLM builds each prompt from one block of 16 tokens per hash id; ids that no other
request uses make every prompt unique, so prefix caching shares nothing that the trace did
not share. A trace that carries its own hash ids (16-token blocks, as in Alibaba's Qwen
traces) keeps them, and with them the prefix reuse they describe.
"""

from __future__ import annotations

import csv
import json
import math
import random
from dataclasses import dataclass
from pathlib import Path

DATASETS = ("random", "sharegpt", "trace")
DATA = Path(__file__).with_name("data")
SHAREGPT = DATA / "sharegpt_lengths.csv"
# tokens per hash id: vLLM's --timed-trace-chunk-hash-size default
CHUNK = 16

# accepted spellings of a trace's columns (vLLM timed_trace, Vidur/Splitwise, Azure traces)
_TIME = ("timestamp", "arrival_time", "arrived_at", "TIMESTAMP")
_INPUT = ("input_length", "input_len", "num_prefill_tokens", "ContextTokens")
_OUTPUT = ("output_length", "output_len", "num_decode_tokens", "GeneratedTokens")


class DatasetError(ValueError):
    """A workload file that cannot be used; the message names the file and the problem."""


@dataclass(frozen=True)
class Request:
    arrival_s: float
    input_len: int
    output_len: int
    hash_ids: tuple[int, ...] | None = None


def sharegpt(num_prompts: int, seed: int, max_len: int | None = None) -> list[Request]:
    """num_prompts length pairs drawn with replacement from the shipped distribution,
    among those whose total fits max_len (the engine would reject the others)."""
    with SHAREGPT.open() as f:
        pairs = [(int(r["input_len"]), int(r["output_len"])) for r in csv.DictReader(f)]
    pairs = [p for p in pairs if max_len is None or p[0] + p[1] <= max_len]
    rng = random.Random(seed)
    return [Request(0.0, i, o) for i, o in rng.choices(pairs, k=num_prompts)]


def _field(row: dict, names: tuple[str, ...], path: Path, line: int) -> str:
    for name in names:
        if row.get(name) not in (None, ""):
            return row[name]
    raise DatasetError(f"{path}:{line}: no {names[0]} field (accepted: {', '.join(names)}; "
                       f"found: {', '.join(row)})")


def _rows(path: Path) -> list[tuple[int, dict]]:
    text = path.read_text()
    if path.suffix in (".jsonl", ".json"):
        rows = []
        for n, line in enumerate(text.splitlines(), 1):
            if line.strip():
                try:
                    rows.append((n, json.loads(line)))
                except json.JSONDecodeError as e:
                    raise DatasetError(f"{path}:{n}: not JSON: {e.msg}") from None
        return rows
    return [(n, row) for n, row in enumerate(csv.DictReader(text.splitlines()), 2)]


def shipped_traces() -> list[str]:
    return sorted(p.stem for p in DATA.glob("*.csv") if p != SHAREGPT)


def resolve_trace(name: str | Path) -> Path:
    """A trace file, or the name of a trace shipped in data/ (e.g. azure_conv_2023)."""
    path = Path(name)
    if path.is_file():
        return path
    if path.name == str(name) and (DATA / f"{name}.csv").is_file():
        return DATA / f"{name}.csv"
    raise DatasetError(f"trace {name} does not exist (shipped traces: "
                       f"{', '.join(shipped_traces())})")


def load_trace(name: str | Path) -> list[Request]:
    """The trace's requests in arrival order, times relative to the first arrival."""
    path = resolve_trace(name)
    reqs = []
    for line, row in _rows(path):
        try:
            t = float(_field(row, _TIME, path, line))
            i = int(_field(row, _INPUT, path, line))
            o = int(_field(row, _OUTPUT, path, line))
        except (TypeError, ValueError) as e:
            if isinstance(e, DatasetError):
                raise
            raise DatasetError(f"{path}:{line}: not a number: {e}") from None
        if i < 1 or o < 1 or not math.isfinite(t):
            raise DatasetError(f"{path}:{line}: input and output lengths must be at least 1 "
                               f"and the time finite (got {t}, {i}, {o})")
        ids = row.get("hash_ids")
        reqs.append(Request(t, i, o, tuple(ids) if ids else None))
    if not reqs:
        raise DatasetError(f"trace {path} has no requests")
    reqs.sort(key=lambda r: r.arrival_s)
    t0 = reqs[0].arrival_s
    return [Request(r.arrival_s - t0, r.input_len, r.output_len, r.hash_ids) for r in reqs]


def write_timed_trace(requests: list[Request], path: Path) -> Path:
    """The requests as vLLM's timed_trace JSONL; requests without hash ids get fresh ones."""
    fresh = 1 + max((max(r.hash_ids) for r in requests if r.hash_ids), default=0)
    with path.open("w") as f:
        for r in requests:
            ids = r.hash_ids
            if ids is not None and len(ids) * CHUNK < r.input_len:
                raise DatasetError(f"a request of {r.input_len} input tokens has {len(ids)} "
                                   f"hash_ids, which cover {len(ids) * CHUNK} tokens "
                                   f"({CHUNK} per id)")
            if ids is None:
                blocks = -(-r.input_len // CHUNK)
                ids = tuple(range(fresh, fresh + blocks))
                fresh += blocks
            f.write(json.dumps({"timestamp": round(r.arrival_s, 6), "input_length": r.input_len,
                                "output_length": r.output_len, "hash_ids": list(ids)}) + "\n")
    return path
