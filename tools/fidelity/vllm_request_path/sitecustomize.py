"""Where a vLLM request's first token spends its time: put this folder on the server's
PYTHONPATH (real GPU or emulated) and each server process appends to
`$REQUEST_PATH_DIR/events.<pid>.tsv` one line per request at each point of the path it sees,
for `tools/fidelity/request_path.py` to join with the client's result:

    api_in      the API server's completion handler starts (HTTP request parsed)
    api_add     AsyncLLM.add_request (prompt rendered and tokenized)
    core_recv   the engine core's input thread has decoded the request
    core_add    the engine core's loop hands it to the scheduler
    core_first  the scheduler has its first output token
    api_first   the API server's output processor has it

Columns: event, wall clock in ms (time.time(); `offset.<pid>` holds time.time() -
time.perf_counter() in seconds, to place the client's perf_counter start times on it),
request id. It changes nothing vLLM computes: each hook logs, then calls the method it wraps.
A sitecustomize, as tools/fidelity/vllm_step_clock/, so that the same file runs unchanged on
the GPU machine, where only PYTHONPATH reaches the server; one of the two at a time.
"""
import builtins
import os
import sys
import time

_DIR = os.environ.get("REQUEST_PATH_DIR", "/tmp")
with open(os.path.join(_DIR, f"offset.{os.getpid()}"), "w") as _f:
    _f.write(repr(time.time() - time.perf_counter()))
_out: list = []
_first: set = set()


def _log(event: str, request_id: str) -> None:
    if not _out:
        _out.append(open(os.path.join(_DIR, f"events.{os.getpid()}.tsv"), "a", buffering=1))
    _out[0].write(f"{event}\t{time.time() * 1e3:.3f}\t{request_id}\n")


def _firsts(event: str, outputs) -> None:
    for o in outputs:
        key = (event, o.request_id)
        if o.new_token_ids and key not in _first:
            _first.add(key)
            _log(event, o.request_id)


def _wrap_async(cls, name: str, event: str, rid) -> None:
    orig = getattr(cls, name)

    async def wrapped(self, *a, **k):
        _log(event, rid(a))
        return await orig(self, *a, **k)

    setattr(cls, name, wrapped)


def _wrap(cls, name: str, before=None, after=None) -> None:
    orig = getattr(cls, name)

    def wrapped(self, *a, **k):
        if before:
            before(a)
        out = orig(self, *a, **k)
        if after:
            after(out)
        return out

    setattr(cls, name, wrapped)


def _core_firsts(outputs_by_client) -> None:
    for eco in outputs_by_client.values():
        _firsts("core_first", eco.outputs)


# (module, class, method, how to hook it); each installed once its module is imported
_HOOKS = [
    ("vllm.entrypoints.openai.completion.serving", "OpenAIServingCompletion",
     "create_completion", lambda c, m: _wrap_async(c, m, "api_in", lambda a: "")),
    ("vllm.v1.engine.async_llm", "AsyncLLM", "add_request",
     lambda c, m: _wrap_async(c, m, "api_add", lambda a: a[0])),
    ("vllm.v1.engine.output_processor", "OutputProcessor", "process_outputs",
     lambda c, m: _wrap(c, m, lambda a: _firsts("api_first", a[0]))),
    ("vllm.v1.engine.core", "EngineCore", "preprocess_add_request",
     lambda c, m: _wrap(c, m, lambda a: _log("core_recv", a[0].request_id))),
    ("vllm.v1.engine.core", "EngineCore", "add_request",
     lambda c, m: _wrap(c, m, lambda a: _log("core_add", a[0].request_id))),
    ("vllm.v1.core.sched.scheduler", "Scheduler", "update_from_output",
     lambda c, m: _wrap(c, m, after=_core_firsts)),
]
_orig_import = builtins.__import__


def _import(name, *args, **kwargs):
    mod = _orig_import(name, *args, **kwargs)
    for hook in list(_HOOKS):
        module, cls_name, method, install = hook
        cls = getattr(sys.modules.get(module), cls_name, None)
        if getattr(cls, method, None) is not None:
            _HOOKS.remove(hook)
            install(cls, method)
    return mod


builtins.__import__ = _import
