"""Exceptions bertkit raises for bad input. Each carries a one-line message that says what to fix.

The CLI turns every ``BertkitError`` into that line on stderr and exit code 2.
"""


class BertkitError(Exception):
    """Base class: a user-facing problem with input, files or options (not a bug in bertkit)."""


class ConfigError(BertkitError, ValueError):
    """A model or training configuration is invalid or unreadable."""


class TokenizerError(BertkitError, ValueError):
    """A vocabulary or tokenizer file is missing or invalid."""


class CheckpointError(BertkitError, ValueError):
    """Weights are missing, unreadable, unsafe, or do not fit the configuration."""


class DataError(BertkitError, ValueError):
    """An input data file is missing, malformed or inconsistent."""


class MissingExtraError(ConfigError, DataError):
    """An optional dependency (a ``bertkit[...]`` extra) is not installed. It is a ``ConfigError`` (the
    installation lacks a package) and a ``DataError`` (the data cannot be read without it), so code that
    catches either one catches it."""


class TruncationWarning(UserWarning):
    """Some inputs were longer than the model's input length and were cut; ``count`` of ``total`` inputs,
    at ``max_length`` tokens."""

    def __init__(self, message: str, count: int, total: int, max_length: int):
        super().__init__(message)
        self.count, self.total, self.max_length = count, total, max_length
