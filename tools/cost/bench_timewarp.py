"""Measure the time warp's costs and print them (issue "Time warp", Measure and report).

- one clock read under the shim vs natively (ns), from a C loop;
- jump round trip (us, median and p99): a 1 ms sleep when every emulated thread waits,
  with 1 process and with 8 processes sleeping at once;
- wall and virtual time of the test programs of done-when 1-3.

Usage: python tools/cost/bench_timewarp.py [--repeat 5]"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
PROGRAMS = HERE.parents[1] / "tests" / "timewarp" / "programs"
REVATI_RUN = [sys.executable, "-m", "revati.cli.main", "run", "--"]


def build(tmp: Path) -> Path:
    exe = tmp / "bench_timewarp"
    subprocess.run(["cc", "-O2", "-o", str(exe), str(HERE / "bench_timewarp.c"), "-ldl"],
                   check=True)
    return exe


def spread(values: list[float]) -> str:
    return (f"median {statistics.median(values):.2f} (min {min(values):.2f}, "
            f"max {max(values):.2f}, n={len(values)})")


def clock_cost(exe: Path, repeat: int) -> None:
    native, shim = [], []
    for _ in range(repeat):
        native.append(float(subprocess.check_output([str(exe), "clock", "5000000"])))
        shim.append(float(subprocess.check_output([*REVATI_RUN, str(exe), "clock", "5000000"])))
    ratios = [s / n for s, n in zip(shim, native, strict=True)]
    print(f"clock read, native ns:       {spread(native)}")
    print(f"clock read, under shim ns:   {spread(shim)}")
    print(f"clock read ratio shim/native: {spread(ratios)}  (target <= 2)")


def jump_latency(exe: Path, procs: int, repeat: int) -> None:
    medians, p99s = [], []
    script = (f"import subprocess, sys; ps = [subprocess.Popen(['{exe}', 'jumps', '2000'], "
              f"stdout=subprocess.PIPE, text=True) for _ in range({procs})]; "
              "print('\\n'.join(p.communicate()[0].strip() for p in ps))")
    for _ in range(repeat):
        out = subprocess.check_output([*REVATI_RUN, sys.executable, "-c", script], text=True)
        for line in out.splitlines():
            med, p99 = map(float, line.split())
            medians.append(med)
            p99s.append(p99)
    print(f"jump round trip, {procs} proc(s), us: median of medians "
          f"{statistics.median(medians):.1f} (spread {min(medians):.1f}-{max(medians):.1f}), "
          f"median p99 {statistics.median(p99s):.1f} (max {max(p99s):.1f})  (target <= 50 "
          "median with one process)")


def program_times(repeat: int) -> None:
    cases = {
        "1: sleep 3600 (time.monotonic)": [
            sys.executable, "-c", "import time, json; a=time.monotonic(); time.sleep(3600); "
            "print(json.dumps({'virtual': time.monotonic()-a}))"],
        "2: 1000 x asyncio.sleep(0.01)": [
            sys.executable, "-c", "import asyncio, json, time\nasync def m():\n"
            " a=time.monotonic()\n for _ in range(1000): await asyncio.sleep(0.01)\n"
            " return time.monotonic()-a\n"
            "print(json.dumps({'virtual': asyncio.run(m())}))"],
        "3: 100 TCP round trips, 50 ms server": [
            sys.executable, str(PROGRAMS / "echo_client.py"), "tcp", "0.05", "100"],
        "3: 100 ZeroMQ round trips, 50 ms server": [
            sys.executable, str(PROGRAMS / "echo_client.py"), "zmq", "0.05", "100"],
    }
    for name, cmd in cases.items():
        walls, virt = [], []
        for _ in range(repeat):
            t0 = time.monotonic()
            out = subprocess.check_output([*REVATI_RUN, *cmd], text=True)
            walls.append(time.monotonic() - t0)
            doc = json.loads(out.strip().splitlines()[-1])
            virt.append(doc["virtual"] if "virtual" in doc else sum(doc["rtts"]))
        print(f"test {name}: wall s {spread(walls)}; virtual s {spread(virt)}; "
              f"speed-up {statistics.median(virt) / statistics.median(walls):.0f}x")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        exe = build(Path(tmp))
        clock_cost(exe, args.repeat)
        jump_latency(exe, 1, args.repeat)
        jump_latency(exe, 8, args.repeat)
    program_times(args.repeat)


if __name__ == "__main__":
    main()
