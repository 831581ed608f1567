"""How compute-bound work slows down when a GPU holds its power limit: the `sustained_power`
figures of revati/conf/hardware/h200_sxm.yaml.

    python tools/calibrate/power_h200.py measure OUT.json   on the GPU machine (torch with CUDA)
    python tools/calibrate/power_h200.py fit OUT.json       anywhere: the figures for the spec

measure: (1) heat-up: 800 back-to-back bf16 GEMMs of 2048x28672x4096 after 3 s idle, each one
timed with CUDA events; (2) 24 GEMM shapes (m 16..8192 on three Llama-3.1-8B weight shapes)
and four other kernels (cuDNN causal SDPA prefill, an add, an RMSNorm), each cold (0.3 s idle
before every repetition, L2 flushed) and hot (right after 0.7 s of back-to-back heater GEMMs,
two heater GEMMs before every repetition); (3) duty cycles: the heater GEMM for 1.5 s with a
host spin of 0-5 ms after each one, its steady duration against its cold one. fit: the slowdown
of compute-bound GEMMs (the median hot/cold of the shapes whose roofline compute time exceeds
their memory time, weighted by their GPU time and scaled to the duty sweep's steady state; see
fit()), of attention (median of the SDPA cases), the duty cycles at which throttling
starts and is complete (the line through the duty cycles with a partial slowdown, from the
highest duty cycle without one), and the power state's time constant (the heat-up against
the throttle the model gives at h(t) = 1 - exp(-t / tau), least squares).

    python tools/calibrate/power_h200.py measure-fill OUT.json   on the GPU machine

measure-fill: what memory-bound work draws. A serving GPU is rarely idle between its
compute-bound steps: it runs decode steps, whose GEMMs, attention and element-wise kernels are
memory-bound. (1) The board's power draw and SM clock (torch.cuda.power_draw, clock_rate) after
2 s of each workload back to back: idle, the heater GEMM, and each fill below. (2) The duty
sweep again with the heater's gaps filled by memory-bound work instead of an idle GPU: per
heater GEMM, k repetitions of a fill, queued without a pause, for 1.5 s; the heater's steady
duration against its cold one at each k. Fills: `decode_gemms`, the four weight GEMMs of a
Llama-3.1-8B layer at 64 tokens; `add_64MB`, an element-wise add streaming 3 x 64 MiB. Written
to OUT.json under "fill", beside what `measure` wrote there if OUT.json exists. fit then
gives `memory_load`: the power load of memory-bound work, where idle is 0 and the heater 1,
from the duty at which the filled sweep starts to slow against the idle one.
"""

from __future__ import annotations

import json
import statistics
import sys
import time

PEAK_BF16, HBM = 989.4e12, 4.8e12  # the H200's datasheet rates (revati/conf/hardware/h200_sxm.yaml)
GEMM_WEIGHTS = ((28672, 4096), (4096, 14336), (6144, 4096))
GEMM_M = (16, 64, 256, 512, 1024, 2048, 4096, 8192)
HEATER = "2048x28672x4096"  # the heat-up's and the duty sweep's GEMM, m x n x k


def _gpu(torch):
    """Both measurements' start: the seeded maker of standard-normal bf16 tensors on the GPU,
    and the heater GEMM (HEATER), which queues one at each call."""
    torch.manual_seed(0)

    def rnd(*s):
        return torch.randn(*s, device="cuda", dtype=torch.bfloat16)

    hx, hw = rnd(2048, 4096), rnd(28672, 4096)
    return rnd, lambda: torch.nn.functional.linear(hx, hw)


def throttle(h: float, onset: float, top: float) -> float:
    """The model's throttle at power state h (rv_power_throttle, revati/native/predict/power.c)."""
    return min(1.0, max(0.0, (h - onset) / (top - onset)))


def measure(out: str) -> None:
    import torch

    F = torch.nn.functional
    rnd, heater = _gpu(torch)

    def ev():
        return torch.cuda.Event(enable_timing=True)

    def heat(sec):
        t = time.time()
        while time.time() - t < sec:
            for _ in range(20):
                heater()
            torch.cuda.synchronize()

    def timed(fn):
        a, b = ev(), ev()
        a.record()
        fn()
        b.record()
        torch.cuda.synchronize()
        return a.elapsed_time(b) * 1e3

    flush = torch.ones(256 << 20, dtype=torch.uint8, device="cuda")

    def cold_hot(fn):
        fn()
        torch.cuda.synchronize()
        cold = []
        for _ in range(3):
            time.sleep(0.3)
            flush.sum()
            cold.append(timed(fn))
        heat(0.7)
        hot = []
        for _ in range(5):
            heater()
            heater()
            flush.sum()
            hot.append(timed(fn))
        return [round(statistics.median(cold), 1), round(statistics.median(hot), 1)]

    res: dict[str, object] = {"gpu": torch.cuda.get_device_name(0), "torch": torch.__version__}
    for _ in range(5):
        heater()
    torch.cuda.synchronize()
    time.sleep(3)
    t0 = ev()
    t0.record()
    evs = []
    for _ in range(800):
        a, b = ev(), ev()
        a.record()
        heater()
        b.record()
        evs.append((a, b))
    torch.cuda.synchronize()
    res["heatup"] = [[round(t0.elapsed_time(a) * 1e3), round(a.elapsed_time(b) * 1e3, 1)]
                     for a, b in evs]
    res["shapes"] = {}
    for n, k in GEMM_WEIGHTS:
        for m in GEMM_M:
            x, w = rnd(m, k), rnd(n, k)
            res["shapes"][f"{m}x{n}x{k}"] = cold_hot(lambda x=x, w=w: F.linear(x, w))
    q, kk, vv = rnd(1, 32, 2048, 128), rnd(1, 8, 2048, 128), rnd(1, 8, 2048, 128)
    q4, k4, v4 = rnd(4, 32, 4096, 128), rnd(4, 8, 4096, 128), rnd(4, 8, 4096, 128)
    big, w8 = rnd(8192, 8192), rnd(8192)
    res["others"] = {
        "sdpa_prefill_2048": cold_hot(lambda: F.scaled_dot_product_attention(
            q, kk, vv, is_causal=True, enable_gqa=True)),
        "sdpa_prefill_b4_4096": cold_hot(lambda: F.scaled_dot_product_attention(
            q4, k4, v4, is_causal=True, enable_gqa=True)),
        "add_64MB": cold_hot(lambda: big + big),
        "rmsnorm_8192x8192": cold_hot(lambda: F.rms_norm(big, (8192,), w8, 1e-6))}
    res["duty"] = {}
    for gap_ms in (0, 0.1, 0.2, 0.35, 0.6, 1.0, 2.0, 5.0):
        time.sleep(2)
        t0, durs, starts = time.time(), [], []
        base = ev()
        base.record()
        while time.time() - t0 < 1.5:
            a, b = ev(), ev()
            a.record()
            heater()
            b.record()
            b.synchronize()
            durs.append(a.elapsed_time(b) * 1e3)
            starts.append(base.elapsed_time(a))
            spin = time.perf_counter()
            while time.perf_counter() - spin < gap_ms / 1e3:
                pass
        half = len(durs) // 2
        span = starts[-1] - starts[half] + durs[-1] / 1e3
        res["duty"][str(gap_ms)] = {"cold_us": round(statistics.median(durs[1:6]), 1),
                                    "steady_us": round(statistics.median(durs[half:]), 1),
                                    "duty": round(sum(durs[half:]) / 1e3 / span, 3)}
    with open(out, "w") as f:
        json.dump(res, f)


def measure_fill(out: str) -> None:
    import torch

    F = torch.nn.functional
    rnd, heater = _gpu(torch)
    x64 = {k: rnd(64, k) for k in (4096, 14336)}
    weights = [rnd(n, k) for n, k in (*GEMM_WEIGHTS, (4096, 4096))]
    big = rnd(8192, 4096)
    fills = {
        "decode_gemms": lambda: [F.linear(x64[w.shape[1]], w) for w in weights],
        "add_64MB": lambda: big + big,
    }

    def board() -> dict[str, int]:
        try:
            return {"power_mw": torch.cuda.power_draw(), "sm_mhz": torch.cuda.clock_rate()}
        except Exception:  # noqa: BLE001 - NVML missing: the timings stand alone
            return {}

    def busy(fn, sec: float) -> None:
        t0 = time.time()
        n = 0
        while time.time() - t0 < sec:
            fn()
            n += 1
            if n % 16 == 0:
                torch.cuda.synchronize()

    def per_call_us(fn) -> float:
        for _ in range(3):
            fn()
        torch.cuda.synchronize()
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        for _ in range(20):
            fn()
        b.record()
        b.synchronize()
        return a.elapsed_time(b) * 1e3 / 20

    res: dict[str, object] = {"gpu": torch.cuda.get_device_name(0), "torch": torch.__version__}
    power: dict[str, object] = {}
    time.sleep(3)
    power["idle"] = board()
    for name, fn in (("heater", heater), *fills.items()):
        time.sleep(2)
        us = per_call_us(fn)
        busy(fn, 2.0)
        power[name] = {**board(), "call_us": round(us, 1)}
    res["power"] = power
    sweeps: dict[str, object] = {}
    for name, fn in fills.items():
        fill_us = power[name]["call_us"]  # type: ignore[index]
        points = {}
        for k in (0, 1, 2, 3, 4, 6, 8, 12, 16, 24, 40):
            reps = max(0, round(k * 130.0 / fill_us))  # k decode-layer GEMM sets' worth
            time.sleep(2)
            t0, marks = time.time(), []
            while time.time() - t0 < 1.5:
                a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                a.record()
                heater()
                b.record()
                for _ in range(reps):
                    fn()
                marks.append((a, b))
                if len(marks) % 4 == 0:
                    marks[-3][1].synchronize()  # the queue stays three heaters deep: never idle
            torch.cuda.synchronize()
            state = board()
            durs = [a.elapsed_time(b) * 1e3 for a, b in marks]
            half = len(marks) // 2
            span = marks[half][0].elapsed_time(marks[-1][0]) * 1e3
            points[str(reps)] = {"cold_us": round(statistics.median(durs[1:4]), 1),
                                 "steady_us": round(statistics.median(durs[half:]), 1),
                                 "duty": round(sum(durs[half:-1]) / span, 3), **state}
        sweeps[name] = {"call_us": fill_us, "points": points}
    res["sweeps"] = sweeps
    try:
        with open(out) as f:
            data = json.load(f)
    except FileNotFoundError:
        data = {}
    data["fill"] = res
    with open(out, "w") as f:
        json.dump(data, f)


def compute_over_memory(m: int, n: int, k: int) -> float:
    return (2.0 * m * n * k / PEAK_BF16) / (2.0 * (m * k + n * k + m * n) / HBM)


def fit(path: str) -> dict[str, float]:
    with open(path) as f:
        res = json.load(f)
    # (hot / cold, cold) of the compute-bound GEMM shapes
    gemm = sorted((hot / cold, cold) for key, (cold, hot) in res["shapes"].items()
                  if compute_over_memory(*map(int, key.split("x"))) > 1)
    attention = [hot / cold for key, (cold, hot) in res["others"].items()
                 if key.startswith("sdpa")]
    duty = sorted((d["duty"], d["steady_us"]) for d in res["duty"].values())
    cold = statistics.median(d["cold_us"] for d in res["duty"].values() if d["duty"] > 0.9)
    full = duty[-1][1] / cold - 1
    share = [(u, s / cold - 1) for u, s in duty if u > 0.5]  # low duty: wake-up, not power
    onset = max(u for u, x in share if x < 0.1 * full)
    partial = [(u, x / full) for u, x in share if u > onset and x < 0.9 * full]
    slope = statistics.mean(f / (u - onset) for u, f in partial)
    top = min(1.0, onset + 1 / slope)
    # Time constant: the heat-up's excess over its first launches, against the model's
    # throttle at h(t) = 1 - exp(-t / tau) (least squares over a grid of tau).
    series = res["heatup"][1:]
    first = statistics.median(d for _, d in series[:5])
    steady = statistics.median(d for _, d in series[len(series) // 2:])
    t0 = series[0][0]

    def misfit(tau_us: float) -> float:
        err = 0.0
        for t, d in series:
            h = 1 - 2.718281828 ** (-(t - t0) / tau_us)
            err += (throttle(h, onset, top) - (d - first) / (steady - first)) ** 2
        return err

    tau_us = min((1000.0 * k for k in range(5, 150)), key=misfit)
    # One factor stands for every compute-bound GEMM, so it is the median weighted by GPU
    # time: the largest GEMMs hold most of a prefill's time and slow least (1.18 at
    # 8192x28672x4096 against 1.27 at 8192x6144x4096; the plain median, 1.241, made vLLM's
    # 8,192-token steps' GEMMs 9 % slow,
    # validation/vllm/llama3_8b/2026-12-03-real-steps-saturating). And it is the steady state
    # of continuous work, the duty sweep's busiest point (the heater GEMM at `full`), not the
    # probe right after heating, which reads the heater's own shape higher.
    half = sum(c for _, c in gemm) / 2
    weighted = next(ratio for i, (ratio, _) in enumerate(gemm)
                    if sum(c for _, c in gemm[:i + 1]) >= half)
    heater = res["shapes"][HEATER]
    slowdown = 1 + full * (weighted - 1) / (heater[1] / heater[0] - 1)
    out = {"gemm_slowdown": round(slowdown, 3),
            "attention_slowdown": round(statistics.median(attention), 3),
            "time_constant_ms": round(tau_us / 1e3, 1),
            "throttle_onset": round(onset, 3), "throttle_full": round(top, 3),
            "gemm_shapes": len(gemm), "first_us": first, "steady_us": steady}
    if "fill" in res:
        out.update(memory_load(res["fill"], onset, top))
    return out


def memory_load(fill: dict, onset: float, top: float) -> dict[str, float]:
    """The power load of memory-bound work (idle 0, the heater 1): the value that makes the
    model's throttle at the filled sweep's load d + (1 - d) * L match each point's measured
    share of the full slowdown (least squares over every fill's points), and, as a check, what
    the board's power readings give: (P_fill - P_idle) / (P_heater_demand - P_idle), where the
    heater's demand at boost clock is what reaches the limit at the idle sweep's onset."""
    points = []
    for sweep in fill["sweeps"].values():
        pts = sweep["points"].values()
        cold = statistics.median(p["cold_us"] for p in pts)
        busiest = max(pts, key=lambda p: p["duty"])
        full = busiest["steady_us"] / cold - 1
        points += [(p["duty"], (p["steady_us"] / cold - 1) / full) for p in pts]

    def misfit(load: float) -> float:
        return sum((throttle(d + (1 - d) * load, onset, top) - x) ** 2
                   for d, x in points)

    out = {"memory_load": min((k / 100 for k in range(101)), key=misfit)}
    power = fill.get("power", {})
    idle, heater = power.get("idle", {}).get("power_mw"), power.get("heater", {}).get("power_mw")
    if idle and heater:
        demand = (heater - (1 - onset) * idle) / onset
        for name in fill["sweeps"]:
            if power.get(name, {}).get("power_mw"):
                out[f"memory_load_power_{name}"] = round(
                    (power[name]["power_mw"] - idle) / (demand - idle), 3)
    return out


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] not in ("measure", "measure-fill", "fit"):
        sys.exit(__doc__)
    if sys.argv[1] == "measure":
        measure(sys.argv[2])
    elif sys.argv[1] == "measure-fill":
        measure_fill(sys.argv[2])
    else:
        print(json.dumps(fit(sys.argv[2]), indent=1))
