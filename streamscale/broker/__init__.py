"""Broker concern: the embedded Apache Kafka broker and the one module that talks to any broker."""

from streamscale.broker.access import BrokerAccess, TopicNotFound
from streamscale.broker.embedded import BrokerError, EmbeddedBroker, resolve_bootstrap

__all__ = ["BrokerAccess", "BrokerError", "EmbeddedBroker", "TopicNotFound", "resolve_bootstrap"]
