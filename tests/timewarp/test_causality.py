"""Done-when 3 and 4: a message in flight stops the clock until its receiver has run."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.host import HOST_DELAY
from tests.timewarp.conftest import revati_run, run_py

SERVER_DELAY = 0.05


PROGRAMS = Path(__file__).with_name("programs")


@pytest.mark.parametrize("transport", ["tcp", "zmq"])
def test_round_trips_include_the_server_delay_and_nothing_more(transport: str) -> None:
    r = revati_run([sys.executable, str(PROGRAMS / "echo_client.py"), transport,
                    str(SERVER_DELAY), "100"])
    assert r.returncode == 0, r.stderr
    rtts = r.json()["rtts"]
    assert len(rtts) == 100
    assert min(rtts) >= SERVER_DELAY  # a jump never skipped part of the server's sleep
    # real processing only on top of the delay: no jump happened while a message was in
    # flight. That processing is CPU time, which counts in virtual time: loaded 2-core CI
    # hosts stretched one round trip of the hundred by 5.4 and by 18.5 ms.
    assert max(rtts) < SERVER_DELAY + HOST_DELAY + r.stolen_s, sorted(rtts)[-5:]


def test_receiver_blocked_in_read_stamps_the_message_at_send_time() -> None:
    r = run_py("""
        import json, os, time
        rd, wr = os.pipe()
        if os.fork() == 0:
            os.close(rd)
            time.sleep(7)  # both sides idle: the clock jumps to here
            sent = time.monotonic()
            os.write(wr, repr(sent).encode())
            time.sleep(10)  # must not be skipped before the reader has run
            os._exit(0)
        os.close(wr)
        data = os.read(rd, 100)
        got = time.monotonic()
        os.wait()
        print(json.dumps({"sent": float(data), "got": got}))
    """)
    assert r.returncode == 0, r.stderr
    out = r.json()
    assert 0 <= out["got"] - out["sent"] < HOST_DELAY + r.stolen_s  # not the writer's next 10 s
