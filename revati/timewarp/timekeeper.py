"""The Timekeeper of one run: owns the shared clock segment and runs the jump loop.

The decision loop itself is native (revati/native/time/timekeeper.c): it reacts to a blocked
thread within microseconds, which a Python loop could not. This class creates the segment,
runs that loop on a thread (ctypes releases the GIL), and answers reports."""

from __future__ import annotations

import ctypes
import os
import signal
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from revati.timewarp.host_probe import HostProbe
from revati.timewarp.native import timekeeper_lib
from revati.timewarp.priority import ahead

# glibc uses SIGRTMIN..SIGRTMIN+2 itself; applications rarely touch the top of the range.
DEFAULT_WAKE_SIGNAL = signal.SIGRTMAX - 2
TK_DEADLOCK = 1


def host_cores() -> int:
    """Cores this process may use: its CPU affinity, capped by a cgroup v2 CPU quota."""
    cores = len(os.sched_getaffinity(0))
    try:
        quota, period = Path("/sys/fs/cgroup/cpu.max").read_text().split()
        if quota != "max":
            cores = min(cores, max(1, -(-int(quota) // int(period))))
    except (OSError, ValueError):
        pass
    return cores


def parse_cores(value: str) -> int:
    """A --cores argument: a count, `auto` (this host's cores) or `off` (0)."""
    if value == "auto":
        return host_cores()
    if value == "off":
        return 0
    n = int(value)
    if n < 0:
        raise ValueError(f"--cores must be auto, off or a count, not {value}")
    return n


def _remove_orphan_segments(shm_dir: Path) -> None:
    """Segments left by Timekeepers that were killed before they could remove their own
    (the creator's pid is in the name)."""
    for seg in shm_dir.glob("revati-*-*"):
        pid = seg.name.split("-")[1]
        if pid.isdigit() and not Path(f"/proc/{pid}").exists():
            seg.unlink(missing_ok=True)


@dataclass(frozen=True)
class Contention:
    """How the rate of virtual time was set while CPU work ran (Timekeeper(cores=N) only):
    the contention share and the host's factor (docs/timewarp.md, "One rate for CPU work")."""

    sampled_s: float      # real seconds the Timekeeper watched
    contended_s: float    # of them, with the emulated threads short of a core each
    virtual_s: float      # the virtual seconds the contended real seconds became at their share
    mean_runnable: float  # runnable emulated threads, on average over the samples
    # CPU-bound time: the real seconds watched with an emulated thread running, the virtual
    # seconds they became, and the lowest and highest rate of virtual time among them (1:
    # real time; their mean is cpu_virtual_s / cpu_real_s)
    cpu_real_s: float
    cpu_virtual_s: float
    rate_min: float
    rate_max: float
    # the host's factor in that rate over the CPU-bound time (the GPU node's CPU speed over
    # this host's, less stolen time; 1 without a node speed and no steal): lowest, mean,
    # highest; and the mean share of CPU time the hypervisor stole
    host_min: float
    host_mean: float
    host_max: float
    steal_mean: float
    # hand-offs: real seconds in which no emulated thread ran and the clock could not jump
    # (a send's grace period, a woken thread not yet on a CPU), and the virtual seconds they
    # became
    handoff_real_s: float
    handoff_virtual_s: float
    handoffs: float

    def __str__(self) -> str:
        return (f"{self.contended_s:.1f} of {self.sampled_s:.1f} real seconds had the "
                f"emulated threads short of a core each (mean {self.mean_runnable:.2f} "
                "runnable); "
                f"they counted as {self.virtual_s:.1f} virtual seconds")


@dataclass
class ThreadReport:
    pid: int
    tid: int
    state: str
    deadline: str
    call: str
    cmd: str

    def __str__(self) -> str:
        return (f"pid {self.pid} tid {self.tid} [{self.command_line()}]: {self.state} in "
                f"{self.call} (deadline {self.deadline})")

    def command_line(self) -> str:
        """The full command line while the process lives; the shim's 64-byte copy after."""
        try:
            raw = Path(f"/proc/{self.pid}/cmdline").read_bytes()
            return raw.replace(b"\0", b" ").decode(errors="replace").strip()
        except OSError:
            return self.cmd.strip() or "?"


class Timekeeper:
    """One virtual clock. Processes attach through the REVATI_SHM environment variable."""

    def __init__(self, trace_dir: Path | None = None, deadlock_timeout_s: float = 30.0,
                 stall_s: float = 0.02, restart: bool = False, cores: int = 0,
                 node_cpu_ms: float | None = None) -> None:
        """restart: keep deciding jumps after a deadlock was detected (a shared server
        reports it to its clients and carries on); otherwise the loop ends there.
        cores: correct for CPU contention, as if the emulated threads shared this many
        cores: virtual time runs at the share of a core each running thread gets, the
        smaller of cores/runnable and the share the kernel's schedstat shows they got
        (which sees other programs too; docs/timewarp.md); 0 counts real time as it
        passes.
        node_cpu_ms: the GPU node's revati.hostspeed time (hardware spec); with cores, CPU
        work also counts at the node's speed, which a probe thread measures here throughout
        the run (host_probe.py)."""
        self.lib = timekeeper_lib()
        shm_dir = Path("/dev/shm") if Path("/dev/shm").is_dir() else Path(tempfile.gettempdir())
        _remove_orphan_segments(shm_dir)
        self.segment = shm_dir / f"revati-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        rc = self.lib.rv_tk_create(str(self.segment).encode(), int(DEFAULT_WAKE_SIGNAL),
                                   str(trace_dir).encode() if trace_dir else b"")
        if rc != 0:
            raise OSError(-rc, f"cannot create the Timekeeper segment {self.segment}")
        self.lib.rv_tk_set_cores(cores)
        self.cores = cores
        self.probe = HostProbe(self.lib, node_cpu_ms) if cores and node_cpu_ms else None
        self.deadlock_timeout_s = deadlock_timeout_s
        self.stall_s = stall_s
        self.restart = restart
        self._deadlock_at: float | None = None
        self._stopping = False
        self._thread: threading.Thread | None = None
        self.nice = os.getpriority(os.PRIO_PROCESS, 0)

    def start(self) -> None:
        """Start deciding jumps; this loop and the probe run ahead of other programs, as the
        deployment's processes do (ProcessTree.spawn)."""
        with ahead() as self.nice:
            if self.probe:
                self.probe.start()
            self._thread = threading.Thread(target=self._loop, name="timekeeper", daemon=True)
            self._thread.start()

    def _loop(self) -> None:
        while True:
            rc = self.lib.rv_tk_run(int(self.deadlock_timeout_s * 1e9), int(self.stall_s * 1e9))
            if rc != TK_DEADLOCK:
                return
            self._deadlock_at = time.monotonic()
            if not self.restart or self._stopping:
                return

    def set_cores(self, cores: int) -> None:
        """The cores the emulated threads share from now on, for a run moved onto other CPUs
        while it runs (sched_setaffinity on all its threads). Only where the correction was on
        from the start: the probe of this host's speed starts with it."""
        if not self.cores or cores < 1:
            raise ValueError(f"set_cores({cores}) needs a Timekeeper made with cores > 0")
        self.lib.rv_tk_set_cores(cores)
        self.cores = cores

    @property
    def deadlocked(self) -> bool:
        return self._deadlock_at is not None

    def deadlock_seen_within(self, seconds: float) -> bool:
        return self._deadlock_at is not None and time.monotonic() - self._deadlock_at < seconds

    def stop(self) -> None:
        self._stopping = True
        if self.probe:
            self.probe.stop()
        self.lib.rv_tk_stop()
        if self._thread:
            self._thread.join(timeout=5)
        self.segment.unlink(missing_ok=True)

    def reserve(self, owner_pid: int) -> int:
        """Count a child about to be spawned as running, so the clock waits for it."""
        idx = self.lib.rv_tk_reserve(owner_pid)
        if idx < 0:
            raise RuntimeError("Timekeeper process table is full")
        return idx

    def child_started(self, idx: int, pid: int) -> None:
        self.lib.rv_tk_child_started(idx, pid)

    @property
    def virtual_ns(self) -> int:
        """Virtual CLOCK_MONOTONIC now, as the emulated processes read it."""
        return self.lib.rv_tk_now()

    def contention(self) -> Contention:
        out = (ctypes.c_double * 15)()
        self.lib.rv_tk_contention(out)
        return Contention(*out)

    @property
    def jumps(self) -> int:
        return self.lib.rv_tk_jumps()

    def pids(self) -> list[int]:
        buf = (ctypes.c_int * 512)()
        n = self.lib.rv_tk_pids(buf, 512)
        return list(buf[:n])

    def threads(self) -> list[ThreadReport]:
        buf = ctypes.create_string_buffer(1 << 20)
        n = self.lib.rv_tk_report(buf, len(buf))
        rows = buf.raw[:n].decode(errors="replace").splitlines()
        return [ThreadReport(int(p), int(t), s, d, c, cmd)
                for p, t, s, d, c, cmd in (r.split("\t", 5) for r in rows)]
