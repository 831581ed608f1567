"""Errors revati-tune reports as one line before any trial starts."""


class ConfigError(ValueError):
    """Invalid input: the message is one line that names the bad value."""
