"""Loaded by the real vLLM server (PYTHONPATH) to record what named Triton kernels compute on
the real GPU: the reference for the kernels whose outputs the emulator must compute on the
host for vLLM's V2 model runner (issue #25, item 1; docs/limits.md).

For each Triton kernel whose `module.name` matches $TRITON_RECORD (a regex), some launches
outside graph capture (the first 8, then every 25th, at most 20 a kernel and process) are
saved with torch.save to $TRITON_RECORD_DIR/<name>.<pid>.<n>.pt: a dict of the kernel's
name and module, its parameter names, the grid (its repr when a callable), the scalar
arguments, and every tensor argument before and after the launch (synchronised; copied to
the CPU; those above 4 MiB as shape and dtype only)."""
import os
import re

from triton.runtime.jit import JITFunction

_PATTERN = re.compile(os.environ.get("TRITON_RECORD", r"^vllm\.v1\.worker\.gpu\."))
_DIR = os.environ.get("TRITON_RECORD_DIR", ".")
_BIG = 4 << 20
_calls: dict[str, int] = {}
_saved: dict[str, int] = {}
_run = JITFunction.run


def _wanted(name: str) -> bool:
    n = _calls[name] = _calls.get(name, 0) + 1
    return (n <= 8 or n % 25 == 0) and _saved.get(name, 0) < 20


def _tensors(torch, bound: dict) -> dict:
    return {k: (v.detach().cpu().clone() if v.numel() * v.element_size() <= _BIG
                else {"shape": tuple(v.shape), "dtype": str(v.dtype)})
            for k, v in bound.items() if isinstance(v, torch.Tensor)}


def run(self, *args, grid, warmup, **kwargs):
    qualified = f"{self.fn.__module__}.{self.fn.__name__}"
    if warmup or not _PATTERN.search(qualified):
        return _run(self, *args, grid=grid, warmup=warmup, **kwargs)
    import torch
    if torch.cuda.is_current_stream_capturing() or not _wanted(qualified):
        return _run(self, *args, grid=grid, warmup=warmup, **kwargs)
    bound = dict(zip(self.arg_names, args, strict=False)) | kwargs  # the rest by keyword
    torch.cuda.synchronize()
    before = _tensors(torch, bound)
    out = _run(self, *args, grid=grid, warmup=warmup, **kwargs)
    torch.cuda.synchronize()
    n = _saved[qualified] = _saved.get(qualified, 0) + 1
    torch.save({"kernel": self.fn.__name__, "module": self.fn.__module__,
                "arg_names": list(self.arg_names),
                "grid": repr(grid) if callable(grid) else tuple(grid),
                "scalars": {k: v for k, v in bound.items()
                            if isinstance(v, (int, float, bool, str)) or v is None},
                "before": before, "after": _tensors(torch, bound)},
               os.path.join(_DIR, f"{self.fn.__name__}.{os.getpid()}.{n}.pt"))
    return out


JITFunction.run = run
