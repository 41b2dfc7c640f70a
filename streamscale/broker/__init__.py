"""Broker concern: the embedded Apache Kafka broker and the one module that talks to any broker."""

from streamscale.broker.access import BrokerAccess, TopicNotFound
from streamscale.broker.daemon import resolve_bootstrap
from streamscale.broker.embedded import BrokerError, EmbeddedBroker

__all__ = ["BrokerAccess", "BrokerError", "EmbeddedBroker", "TopicNotFound", "resolve_bootstrap"]
