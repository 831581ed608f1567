"""The error `revati bench` ends with: its message says why, in one line."""


class BenchError(Exception):
    """The benchmark could not run or finish; the message says why, in one line."""
