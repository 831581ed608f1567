"""`revati profile args`: kernel-argument features for a real-GPU profile, from an emulated replay.

CUPTI records a launch's shape and duration but not its arguments, and the sizes a kernel works
on are often only there: an RMSNorm launches one block per row at any hidden size, a segmented
sort one block per row at any vocabulary (features.ARG_COLUMNS, predict.h rv_arg_sizes). The
micro sweeps and the e2e forwards are deterministic torch programs, so replaying them on an
emulated GPU of the same model launches the same kernels in the same order. The device shim
logs every queued operation with its argument sizes (REVATI_LAUNCH_LOG); this joins that log to
the profile, sweep point by sweep point and position by position, and keeps a row's -1 (unknown)
unless kernel name, op and launch shape agree. No GPU is needed, and the join reports how many
rows matched.

    revati profile args --profile DIR [--hardware h200_sxm] [--only SWEEP,...]
"""

from __future__ import annotations

import argparse
import ctypes
import datetime
import os
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Iterator
from functools import cache
from pathlib import Path

MARK = "#"  # marker lines in the launch log: "#<key>" opens a measured region, "#" closes it
# Sweeps whose points the replay skips: their launches are predicted by shape (attention, cuDNN
# compiles a graph per shape, minutes under emulation) or come from another program (vLLM FA3).
SKIP_PREFIXES = ("attn_",)


@cache
def _demangler():
    lib = ctypes.CDLL("libstdc++.so.6")
    fn = lib.__cxa_demangle
    fn.restype = ctypes.c_void_p
    fn.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_void_p,
                   ctypes.POINTER(ctypes.c_int)]
    libc = ctypes.CDLL(None)
    libc.free.argtypes = [ctypes.c_void_p]
    return fn, libc.free


@cache  # an engine's launch log repeats a few hundred names over ~100,000 lines
def demangle(name: str) -> str:
    """The demangled kernel name, as CUPTI reports it (the profile's names)."""
    if not name.startswith("_Z"):
        return name
    fn, free = _demangler()
    status = ctypes.c_int()
    out = fn(name.encode(), None, None, ctypes.byref(status))
    if status.value != 0 or not out:
        return name
    text = ctypes.string_at(out).decode()
    free(out)
    return text


def read_log(path: Path) -> dict[str, list[dict[str, object]]]:
    """{region key: the operations queued inside it} from a launch log with markers."""
    regions: dict[str, list[dict[str, object]]] = {}
    current: list[dict[str, object]] | None = None
    for line in path.read_text().splitlines():
        if line.startswith(MARK):
            key = line[len(MARK):]
            current = regions.setdefault(key, []) if key else None
            continue
        if current is not None:
            current.append(parse_launch(line))
    return regions


def parse_launch(line: str) -> dict[str, object]:
    """One queued operation of a launch log (the shim's log_launch line) as profile columns."""
    from revati.predict.features import ARG_COLUMNS

    f = line.split("\t")
    return dict(op=int(f[0]), kernel=demangle(f[1]), grid_x=int(f[2]), grid_y=int(f[3]),
                grid_z=int(f[4]), block_x=int(f[5]), block_y=int(f[6]), block_z=int(f[7]),
                shared_bytes=int(f[8]), bytes=int(f[9]), copy_kind=int(f[10]),
                **{c: int(v) for c, v in zip(ARG_COLUMNS, f[11:], strict=True)})


SHAPE = ("op", "grid_x", "grid_y", "grid_z", "block_x", "block_y", "block_z", "shared_bytes",
         "bytes")


def join(rows, regions: dict[str, list[dict[str, object]]], key_of) -> tuple[int, int]:
    """Copy argument sizes from the replay's launches into profile rows (a pandas DataFrame,
    modified in place) where op, name and shape agree. key_of(row) -> (region key, position).
    Returns (rows matched, rows tried)."""
    from revati.predict.features import ARG_COLUMNS, Op

    matched = tried = 0
    for idx, row in rows.iterrows():
        key, pos = key_of(row)
        if pos < 0 or int(row["op"]) != Op.KERNEL:
            continue
        tried += 1
        launches = regions.get(key, [])
        if pos >= len(launches):
            continue
        got = launches[pos]
        if got["kernel"] != row["kernel"] or any(int(row[c]) != got[c] for c in SHAPE
                                                 if c != "op"):
            continue
        for c in ARG_COLUMNS:
            rows.at[idx, c] = got[c]
        matched += 1
    return matched, tried


# ---- the replay, inside the emulated process --------------------------------------------

def _marker(log: str):
    fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    def mark(key: str) -> None:
        os.write(fd, f"{MARK}{key}\n".encode())
    return mark


def _micro_points(torch, only: list[str]) -> Iterator[tuple[str, object]]:
    """(key "<sweep>/<ordinal in sweep>", point) of the sweeps asked for, in sweep order."""
    from revati.profile.micro import sweeps

    seen: dict[str, int] = {}
    for point in sweeps(torch):
        n = seen.get(point.sweep, 0)
        seen[point.sweep] = n + 1
        if point.sweep in only:
            yield f"{point.sweep}/{n}", point


def replay(log: str, only: list[str], e2e: list[str]) -> int:
    import torch

    from revati.profile import e2e as e2e_mod

    mark = _marker(log)
    warnings.filterwarnings("ignore", category=UserWarning)
    torch.manual_seed(0)
    t0, done = time.time(), 0
    with torch.no_grad():
        for key, point in _micro_points(torch, only):
            try:
                run = point.setup()
                run()
            except (RuntimeError, ValueError, TypeError) as exc:
                print(f"[args] {key}: {str(exc).splitlines()[0][:160]}", flush=True)
                continue
            mark(key)
            run()
            mark("")
            done += 1
            if done % 500 == 0:
                print(f"[args] {done} points replayed, {time.time() - t0:.0f} s", flush=True)
        for arch in e2e:
            a = e2e_mod.ARCHS[arch]
            model = e2e_mod.build(torch, a)
            for case in e2e_mod.DEFAULT_CASES:
                b, q_len, kv_len = e2e_mod.CASES[case]
                ids, pos, cache_kv = e2e_mod.inputs(torch, a, b, q_len, kv_len)
                e2e_mod.forward(torch, a, model, ids, pos, cache_kv, kv_len)
                mark(f"e2e/{arch}/{case}")
                e2e_mod.forward(torch, a, model, ids, pos, cache_kv, kv_len)
                mark("")
            del model
    print(f"[args] replayed {done} points and {len(e2e)} e2e architectures in "
          f"{time.time() - t0:.0f} s", flush=True)
    return 0


# ---- the command -----------------------------------------------------------------------

def run(args: argparse.Namespace) -> int:
    from revati.predict.features import ARG_COLUMNS
    from revati.predict.hwprofile import read_profile
    from revati.profile.e2e import DEFAULT_ARCH

    profile = read_profile(args.profile)
    df = profile.launches
    sweeps = sorted(s for s in df.sweep.unique() if not s.startswith(SKIP_PREFIXES))
    if args.only:
        sweeps = [s for s in sweeps if any(s.startswith(p) for p in args.only.split(","))]
    k = profile.e2e_kernels
    if k is not None and "arch" not in k.columns:
        k["arch"] = DEFAULT_ARCH
    e2e = [] if k is None else sorted(k.arch.unique())
    with tempfile.TemporaryDirectory(prefix="revati-args-") as tmp:
        log = Path(tmp) / "launches.tsv"
        cmd = [sys.executable, "-m", "revati.cli.main", "run", "--hardware", args.hardware,
               "--deadlock-timeout", "0", "--", sys.executable, "-m", "revati.profile.args",
               "_replay", "--log", str(log), "--only", ",".join(sweeps),
               "--e2e", ",".join(e2e)]
        print(f"[args] replaying {len(sweeps)} sweeps and {len(e2e)} e2e architectures on an "
              f"emulated {args.hardware}", flush=True)
        # Durations do not matter to the replay: a fixed one spares loading the models.
        env = {**os.environ, "REVATI_LAUNCH_LOG": str(log), "REVATI_PREDICT_FIXED_NS": "1000"}
        rc = subprocess.run(cmd, env=env).returncode
        if rc != 0:
            print(f"revati profile args: the replay failed (exit {rc})", file=sys.stderr)
            return 1
        regions = read_log(log)
    ordinal = {}
    for sweep in sweeps:
        points = sorted(df[df.sweep == sweep].point.unique())
        ordinal.update({(sweep, p): i for i, p in enumerate(points)})
    picked = df[df.sweep.isin(sweeps)]
    matched, tried = join(picked, regions, lambda r: (
        f"{r['sweep']}/{ordinal[(r['sweep'], r['point'])]}", int(r["position"])))
    df.update(picked[ARG_COLUMNS])
    print(f"[args] sweeps: {matched} of {tried} kernel rows matched a replayed launch")
    m2 = t2 = 0
    if e2e:
        m2, t2 = join(k, regions, lambda r: (f"e2e/{r['arch']}/{r['case']}",
                                             int(r["position"])))
        print(f"[args] e2e: {m2} of {t2} kernel rows matched a replayed launch")
    for col in ARG_COLUMNS:
        df[col] = df[col].astype("int64")
    # One record per run: a run with --only refreshes some sweeps and keeps the others' sizes
    # from the runs before it.
    runs = profile.provenance.get("args", [])
    profile.provenance["args"] = [*(runs if isinstance(runs, list) else [runs]), {
        "command": "revati profile args " + " ".join(argv_of(args)),
        "date": datetime.datetime.now(datetime.UTC).isoformat(),
        "sweep_kernel_rows_matched": [matched, tried],
        "e2e_kernel_rows_matched": [m2, t2] if e2e else None}]
    profile.write(args.profile)
    return 0


def argv_of(args: argparse.Namespace) -> list[str]:
    out = ["--profile", str(args.profile), "--hardware", args.hardware]
    return out + (["--only", args.only] if args.only else [])


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--profile", required=True, type=Path,
                        help="hardware profile folder to complete (rewritten in place)")
    parser.add_argument("--hardware", default="h200_sxm",
                        help="the emulated GPU of the replay: the profile's GPU model")
    parser.add_argument("--only", default="", help="comma-separated sweep name prefixes")


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["_replay"]:  # inside the emulated process
        p = argparse.ArgumentParser(prog="revati.profile.args _replay")
        p.add_argument("--log", required=True)
        p.add_argument("--only", default="")
        p.add_argument("--e2e", default="")
        a = p.parse_args(argv[1:])
        return replay(a.log, [s for s in a.only.split(",") if s],
                      [s for s in a.e2e.split(",") if s])
    parser = argparse.ArgumentParser(prog="revati profile args", description=__doc__)
    add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
