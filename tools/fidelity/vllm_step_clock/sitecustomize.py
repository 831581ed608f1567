"""Per-step clock of a vLLM V1 worker: put this folder on the server's PYTHONPATH (real GPU
or emulated) and each worker process writes `$STEP_CLOCK_DIR/steps.<pid>.tsv`, one line per
engine step with its batch and its times, to compare a real and an emulated run step by
step (`tools/fidelity/step_clock_compare.py`).

Columns: step, t_ms (wall clock, ms since the epoch, at the step's execute_model: joins the
server's and the client's logs), tokens, reqs, prefill_tokens
(query tokens of rows with more than one), prefill_rows, new_reqs, cpu_exec_ms (execute_model
on the CPU), thread_cpu_ms (the CPU time execute_model's thread used meanwhile),
cpu_sample_ms (sample_tokens on the CPU), gpu_ms (CUDA events on the current
stream from the start of execute_model to the end of sample_tokens: the step's GPU span,
idle gaps inside the step included).

It changes nothing vLLM computes; the events are queried, never synchronised, so async
scheduling keeps its overlap. Why a sitecustomize and not a vLLM plugin: the same file must
run unchanged on the H200 machine, where only PYTHONPATH reaches the server.
"""
import builtins
import os
import sys
import time

_orig_import = builtins.__import__
_hooked: list[int] = []


def _install(worker_cls) -> None:
    import torch

    out_dir = os.environ.get("STEP_CLOCK_DIR", "/tmp")
    state = {"n": 0, "pending": [], "open": None, "fh": None}

    def fh():
        if state["fh"] is None:
            state["fh"] = open(os.path.join(out_dir, f"steps.{os.getpid()}.tsv"), "a")
        return state["fh"]

    def drain(force: bool) -> None:
        keep = []
        for row, ev0, ev1 in state["pending"]:
            if force:
                ev1.synchronize()
            if ev1.query():
                row.append(f"{ev0.elapsed_time(ev1):.4f}")
                fh().write("\t".join(str(x) for x in row) + "\n")
            else:
                keep.append((row, ev0, ev1))
        state["pending"] = keep
        fh().flush()

    execute, sample = worker_cls.execute_model, worker_cls.sample_tokens

    def execute_model(self, scheduler_output, *a, **k):
        n_tok = scheduler_output.total_num_scheduled_tokens
        if n_tok <= 0:
            return execute(self, scheduler_output, *a, **k)
        per_req = list(scheduler_output.num_scheduled_tokens.values())
        pre = [x for x in per_req if x > 1]
        ev0 = torch.cuda.Event(enable_timing=True)
        ev0.record()
        wall0, t0, c0 = time.time(), time.perf_counter(), time.thread_time()
        try:
            return execute(self, scheduler_output, *a, **k)
        finally:
            t1, c1 = time.perf_counter(), time.thread_time()
            state["n"] += 1
            state["open"] = ([state["n"], f"{wall0 * 1e3:.3f}", n_tok, len(per_req), sum(pre),
                              len(pre), len(scheduler_output.scheduled_new_reqs),
                              f"{(t1 - t0) * 1e3:.3f}", f"{(c1 - c0) * 1e3:.3f}"], ev0)

    def sample_tokens(self, *a, **k):
        t0 = time.perf_counter()
        try:
            return sample(self, *a, **k)
        finally:
            if state["open"] is not None:
                row, ev0 = state["open"]
                state["open"] = None
                ev1 = torch.cuda.Event(enable_timing=True)
                ev1.record()
                row.append(f"{(time.perf_counter() - t0) * 1e3:.3f}")
                state["pending"].append((row, ev0, ev1))
                drain(force=len(state["pending"]) > 64)

    import atexit

    atexit.register(lambda: state["pending"] and drain(force=True))
    worker_cls.execute_model, worker_cls.sample_tokens = execute_model, sample_tokens


def _import(name, *args, **kwargs):
    mod = _orig_import(name, *args, **kwargs)
    if not _hooked:
        m = sys.modules.get("vllm.v1.worker.gpu_worker")
        if m is not None and hasattr(m, "Worker"):
            _hooked.append(1)
            _install(m.Worker)
    return mod


builtins.__import__ = _import
