"""Done-when 5: thread synchronisation primitives time out in virtual time."""

from __future__ import annotations

import pytest

from tests.timewarp.conftest import run_py


def test_event_queue_condition_timeouts() -> None:
    r = run_py("""
        import json, queue, threading, time
        out = {}
        a = time.monotonic(); threading.Event().wait(30); out["event"] = time.monotonic() - a
        a = time.monotonic()
        try:
            queue.Queue().get(timeout=45)
        except queue.Empty:
            out["queue"] = time.monotonic() - a
        c = threading.Condition()
        with c:
            a = time.monotonic(); c.wait(12.5); out["condition"] = time.monotonic() - a
        a = time.monotonic(); threading.Lock().acquire(); l = threading.Lock(); l.acquire()
        l.acquire(timeout=7); out["lock"] = time.monotonic() - a
        print(json.dumps(out))
    """)
    assert r.returncode == 0, r.stderr
    out = r.json()
    assert out["event"] == pytest.approx(30, abs=0.01)
    assert out["queue"] == pytest.approx(45, abs=0.01)
    assert out["condition"] == pytest.approx(12.5, abs=0.01)
    assert out["lock"] == pytest.approx(7, abs=0.01)


def test_event_set_by_another_thread_wakes_the_waiter_at_the_right_time() -> None:
    r = run_py("""
        import json, threading, time
        e = threading.Event()
        threading.Timer(20, e.set).start()
        a = time.monotonic()
        ok = e.wait(100)
        print(json.dumps({"ok": ok, "t": time.monotonic() - a}))
    """)
    assert r.returncode == 0, r.stderr
    out = r.json()
    assert out["ok"] is True
    assert out["t"] == pytest.approx(20, abs=0.01)


def test_thread_pool_of_sleeping_tasks_overlaps_like_real_threads() -> None:
    r = run_py("""
        import json, time
        from concurrent.futures import ThreadPoolExecutor
        def task(i):
            time.sleep(10 + i)
            return time.monotonic()
        a = time.monotonic()
        with ThreadPoolExecutor(4) as pool:
            ends = list(pool.map(task, range(8)))
        print(json.dumps({"ends": [e - a for e in ends], "total": time.monotonic() - a}))
    """)
    assert r.returncode == 0, r.stderr
    out = r.json()
    # 4 workers: tasks 0-3 end at 10..13, then 4-7 start as each worker frees up
    expected = [10, 11, 12, 13, 10 + 14, 11 + 15, 12 + 16, 13 + 17]
    assert out["ends"] == pytest.approx(expected, abs=0.05)
    assert out["total"] == pytest.approx(30, abs=0.05)


def test_threads_fighting_over_the_gil_do_not_hang_or_skip_time() -> None:
    r = run_py("""
        import json, threading, time
        def spin(n):
            x = 0
            for i in range(n):
                x += i
        res = {}
        def sleeper():
            a = time.monotonic(); time.sleep(5); res["sleep"] = time.monotonic() - a
        spinners = [threading.Thread(target=spin, args=(3_000_000,)) for _ in range(3)]
        s = threading.Thread(target=sleeper)
        a = time.monotonic()
        for t in spinners: t.start()
        s.start()
        done = []
        for t in spinners: t.join(); done.append(time.monotonic() - a)
        s.join()
        print(json.dumps({"sleep": res["sleep"], "spinners_done": done}))
    """)
    assert r.returncode == 0, r.stderr
    out = r.json()
    assert out["sleep"] == pytest.approx(5, abs=0.01)
    # the spinners need well under a second of real CPU; had the clock jumped to the
    # sleeper's deadline while they computed, they would finish after 5 s
    assert max(out["spinners_done"]) < 3
