"""Three children per multiprocessing start method each sleep 50 s of virtual time."""

import json
import multiprocessing as mp
import time


def work(q) -> None:
    a = time.monotonic()
    time.sleep(50)
    q.put(time.monotonic() - a)


if __name__ == "__main__":
    out = {}
    for method in ("fork", "spawn", "forkserver"):
        ctx = mp.get_context(method)
        q = ctx.Queue()
        a = time.monotonic()
        procs = [ctx.Process(target=work, args=(q,)) for _ in range(3)]
        for p in procs:
            p.start()
        inner = [q.get() for _ in procs]
        for p in procs:
            p.join()
        out[method] = {"inner": inner, "outer": time.monotonic() - a}
    print(json.dumps(out))
