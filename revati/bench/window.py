"""Where the client's measured requests begin: the predictor's counts and the engine log's
length then, to tell the load's kernels and compilations from the start-up's."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from revati.bench.load import MEASURED_RUN


class MeasuredStart:
    """Looked at every 0.2 s of real time while the client runs. The counts kept are those
    of the last look before the client's log showed MEASURED_RUN: a short load's measured
    requests can all end between two looks (0.15 s of real time for 8 requests), so counts
    taken at the look that first sees the line may already be the end's. The window then
    holds at most one look's worth of warm-up requests besides the measured ones."""

    def __init__(self, totals: Callable[[], dict[str, int]], engine_log: Path,
                 client_log: Path) -> None:
        self._totals, self._engine_log, self._client_log = totals, engine_log, client_log
        self.totals: dict[str, int] | None = None
        self.engine_log_size = 0
        self._last = self._now()

    def _now(self) -> tuple[dict[str, int], int]:
        return self._totals(), self._engine_log.stat().st_size

    def look(self) -> bool:
        """Whether the measured requests have begun."""
        if self.totals is None:
            # counted before the client's log is read: if it lacks the line, the counts
            # predate the measured requests
            now = self._now()
            if MEASURED_RUN in self._client_log.read_text(errors="replace"):
                self.totals, self.engine_log_size = self._last
            else:
                self._last = now
        return self.totals is not None
