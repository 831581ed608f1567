"""Loaded by the real vLLM server (PYTHONPATH) to print vLLM's memory-profiling terms in bytes:
its own log rounds them to 0.01 GiB, and the KV-cache size turns on MiB."""
import builtins
import sys

_orig_import = builtins.__import__
_done: list[int] = []


def _import(name, *args, **kwargs):
    mod = _orig_import(name, *args, **kwargs)
    m = sys.modules.get("vllm.utils.mem_utils")
    if m is not None and not _done and hasattr(m, "MemoryProfilingResult"):
        _done.append(1)

        def raw(self) -> str:
            return (f"RAWMEM torch_peak={self.torch_peak_increase} "
                    f"non_torch={self.non_torch_increase} weights={self.weights_memory} "
                    f"non_kv={self.non_kv_cache_memory}")
        m.MemoryProfilingResult.__repr__ = raw
        m.MemoryProfilingResult.__str__ = raw
    return mod


builtins.__import__ = _import
