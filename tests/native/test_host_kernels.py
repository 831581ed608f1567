"""vLLM V2 runner's bookkeeping kernels, computed on the host (cuda_host_kernels.c), against
what the same kernels computed on a real GPU.

The reference is every launch that tools/device/triton_record_sitecustomize.py recorded
during a real vLLM 0.26.0 load (validation/vllm/llama3_8b-v2-runner/2026-12-05-real-kernels):
each launch is replayed through the pinned vLLM's own Triton kernel on the emulated GPU,
and every tensor it was handed must read afterwards what it read on the real GPU."""

import json
import tarfile
from pathlib import Path

import pytest

from revati.bench.server import BenchError, find_python

REC = (Path(__file__).parents[2] / "validation/vllm/llama3_8b-v2-runner/2026-12-05-real-kernels"
       / "triton_rec.tar.xz")
COMPUTED = {"_apply_write_kernel", "_prepare_pos_seq_lens_kernel",
            "_get_num_sampled_and_rejected_kernel", "_post_update_kernel"}

REPLAY = """
import glob, json, sys
import torch
from vllm.v1.worker.gpu import block_table, buffer_utils, input_batch
modules = {"input_batch": input_batch, "buffer_utils": buffer_utils, "block_table": block_table}
out = []
for path in sorted(glob.glob(sys.argv[1] + "/*.pt")):
    rec = torch.load(path)
    module = next(m for k, m in modules.items() if rec["module"].endswith(k))
    args = {}
    for name in rec["arg_names"]:
        if name in rec["before"]:
            t = rec["before"][name]   # above 4 MiB: recorded as shape and dtype only
            args[name] = (t.to("cuda") if isinstance(t, torch.Tensor) else torch.zeros(
                t["shape"], dtype=getattr(torch, t["dtype"].split(".")[1]), device="cuda"))
        elif name in rec["scalars"]:
            args[name] = rec["scalars"][name]
    options = {k: v for k, v in rec["scalars"].items() if k not in rec["arg_names"]}
    getattr(module, rec["kernel"])[tuple(rec["grid"])](**args, **options)
    torch.cuda.synchronize()
    differ = [name for name, t in rec["after"].items()
              if isinstance(t, torch.Tensor) and not torch.equal(args[name].cpu(), t)]
    out.append({"kernel": rec["kernel"], "grid": rec["grid"], "differ": differ})
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def vllm_python() -> Path:
    try:
        return find_python("vllm")
    except BenchError as e:
        pytest.skip(str(e))


def test_v2_runner_bookkeeping_matches_the_real_gpu(emulated, vllm_python, tmp_path):
    with tarfile.open(REC) as tar:
        tar.extractall(tmp_path, filter="data")
    script = tmp_path / "replay.py"
    script.write_text(REPLAY)
    proc = emulated.run_with(vllm_python, [str(script), str(tmp_path / "keep")], timeout=600)
    launches = json.loads(proc.stdout.strip().splitlines()[-1])
    computed = [x for x in launches if x["kernel"] in COMPUTED]
    assert {x["kernel"] for x in computed} == COMPUTED
    assert len(computed) == 80   # 20 recorded launches of each, decode and prefill steps
    assert [x for x in computed if x["differ"]] == []
    # the rest stay predicted: what they write reads zero, not what the GPU computed
    assert all(x["differ"] for x in launches if x["kernel"] not in COMPUTED)


def test_small_fills_and_integer_aranges_hold_their_values(emulated):
    """What the V2 runner builds its bookkeeping's inputs with (`new_ones`, `torch.arange`)
    holds its values, also when captured into a graph: from the graph's first replay on, not
    while it is captured; a float arange stays predicted."""
    out = emulated.json("""
import json, torch
x = torch.zeros(8, dtype=torch.int32, device="cuda")
ones = x.new_ones(5)
g = torch.cuda.CUDAGraph()
with torch.cuda.graph(g):
    captured = torch.full((4,), 7, dtype=torch.int32, device="cuda")
print(json.dumps({
    "ones": ones.cpu().tolist(),
    "full": torch.full((3,), -2, dtype=torch.int64, device="cuda").cpu().tolist(),
    "arange": torch.arange(5, device="cuda", dtype=torch.int32).cpu().tolist(),
    "stepped": torch.arange(7, 0, -3, device="cuda").cpu().tolist(),
    "float": torch.arange(3, device="cuda", dtype=torch.float32).cpu().tolist(),
    "captured": captured.cpu().tolist(),
    "replayed": (g.replay(), captured.cpu().tolist())[1]}))
""")
    assert out["ones"] == [1] * 5 and out["full"] == [-2] * 3
    assert out["arange"] == [0, 1, 2, 3, 4] and out["stepped"] == [7, 4, 1]
    assert out["float"] == [0.0] * 3
    assert out["captured"] == [0] * 4 and out["replayed"] == [7] * 4
