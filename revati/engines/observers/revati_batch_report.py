"""The shim's entry point for an engine's batch: shared by Revati's engine plugins.

`rv_attention_batch(rows, q_lens, kv_lens, heads, kv_heads, head_dim)` tells the duration
predictor the query and KV length of every request of the forward whose attention kernels
are launched (or replayed) next; the plugins call it with CPU tensors the engine already
holds, so observing costs the engine nothing it computes."""

from __future__ import annotations

import ctypes
import importlib
import logging
from collections.abc import Callable

log = logging.getLogger(__name__)


def reporter() -> Callable[..., None] | None:
    """The shim's reporting function, or None when the engine does not run under Revati's
    emulation (the plugins then do nothing)."""
    try:
        lib = ctypes.CDLL("librevati_predict.so")  # already loaded by the device shim
        report = lib.rv_attention_batch
    except (OSError, AttributeError):
        return None
    report.restype = None
    report.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int,
                       ctypes.c_int, ctypes.c_int]
    return report


def report_lengths(report: Callable[..., None], q, kv, heads: int, kv_heads: int,
                   head_dim: int) -> None:
    """Report one forward: q and kv are CPU integer tensors of one length per request."""
    import torch

    q = q.to(torch.int64).contiguous()
    kv = kv.to(torch.int64).contiguous()
    report(len(kv), q.data_ptr(), kv.data_ptr(), heads, kv_heads, head_dim)


def observe(cls: type, method: str, before: Callable[..., None]) -> None:
    """Wrap cls.method so that before(self, *args, **kwargs) runs first, once however often
    the plugin is loaded; the method itself runs unchanged."""
    original = getattr(cls, method)
    if getattr(original, "_revati_observed", False):
        return

    def observed(self, *args, **kwargs):
        before(self, *args, **kwargs)
        return original(self, *args, **kwargs)

    observed._revati_observed = True
    setattr(cls, method, observed)


def observed_class(module: str, name: str) -> type | None:
    """The engine's class to observe, or None (logged) when this engine build lacks it."""
    try:
        return getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError) as e:
        log.warning("revati: %s.%s not importable (%s): attention is predicted from "
                    "launches only", module, name, e)
        return None
