"""Does the power-limit slowdown of compute-bound GEMMs depend on the numbers multiplied?

    python tools/calibrate/power_data_h200.py OUT.json      on the GPU machine (torch with CUDA)

tools/calibrate/power_h200.py measured the sustained-power slowdown
(revati/conf/hardware/h200_sxm.yaml sustained_power) with standard-normal operands. The
engines' dummy weights (vLLM's and SGLang's --load-format dummy) are uniform in +-1e-3, RMSNorm
weights included, so their activations are small too; trained weights are roughly normal with a
std of a few 1e-2. A GEMM's power draw, and so how far the SM clock falls at the power limit,
depends on how many bits toggle in the multipliers. For each kind of operands this times the
gate/up GEMM of Llama-3.1-8B at 8,192 tokens (x [8192, 4096] @ w[28672, 4096]^T, bf16): cold
(right after 2 s idle) and steady (the second half of 1.5 s back to back), with the board's
power draw and SM clock at the end of the steady phase when NVML answers.
"""

from __future__ import annotations

import json
import statistics
import sys
import time

M, N, K = 8192, 28672, 4096


def main(out: str) -> None:
    import torch

    F = torch.nn.functional
    torch.manual_seed(0)
    dev, bf16 = "cuda", torch.bfloat16

    def normal(*s, std=1.0):
        return (torch.randn(*s, device=dev) * std).to(bf16)

    def uniform(*s, lim):
        return ((torch.rand(*s, device=dev) * 2 - 1) * lim).to(bf16)

    kinds = {
        # what power_h200.py used
        "randn_x_randn": lambda: (normal(M, K), normal(N, K)),
        # trained-like: unit-RMS activations (after RMSNorm), weights of std 0.02
        "trained_like": lambda: (normal(M, K), normal(N, K, std=0.02)),
        # dummy weights: the RMSNorm output is unit-RMS times a +-1e-3 weight
        "dummy_like": lambda: ((torch.rand(M, K, device=dev) * 2 - 1).mul(1.7)
                               .mul(torch.rand(K, device=dev) * 2e-3 - 1e-3).to(bf16),
                               uniform(N, K, lim=1e-3)),
        "zeros": lambda: (torch.zeros(M, K, device=dev, dtype=bf16),
                          torch.zeros(N, K, device=dev, dtype=bf16)),
    }

    def nvml():
        try:
            return {"power_mw": torch.cuda.power_draw(), "sm_mhz": torch.cuda.clock_rate()}
        except Exception as e:  # noqa: BLE001 - NVML missing is a note, not a failure
            return {"nvml": str(e)[:120]}

    res: dict[str, object] = {"gpu": torch.cuda.get_device_name(0), "torch": torch.__version__,
                              "shape": [M, N, K]}
    for name, make in kinds.items():
        x, w = make()
        F.linear(x, w)
        torch.cuda.synchronize()
        time.sleep(2)
        durs = []
        t0 = time.time()
        while time.time() - t0 < 1.5:
            a = torch.cuda.Event(enable_timing=True)
            b = torch.cuda.Event(enable_timing=True)
            a.record()
            F.linear(x, w)
            b.record()
            durs.append((a, b))
            if len(durs) % 8 == 0:
                b.synchronize()  # keep the queue short, the GPU busy
        torch.cuda.synchronize()
        us = [a.elapsed_time(b) * 1e3 for a, b in durs]
        state = nvml()
        cold = statistics.median(us[1:4])
        steady = statistics.median(us[len(us) // 2:])
        res[name] = {"cold_us": round(cold, 1), "steady_us": round(steady, 1),
                     "steady_over_cold": round(steady / cold, 3), "calls": len(us), **state}
        print(name, res[name], flush=True)
        del x, w
    with open(out, "w") as f:
        json.dump(res, f, indent=1)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
