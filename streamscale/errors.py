"""Errors that the CLI reports as one clear line instead of a traceback."""


class StreamscaleError(Exception):
    """Base class: a problem the user can fix (bad input, bad config, missing service)."""


class ConfigError(StreamscaleError):
    """A spec, option or environment setting is wrong."""


class UnsupportedByBroker(StreamscaleError):
    """The broker does not implement a Kafka API that the operation needs."""
