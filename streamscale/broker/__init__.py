"""Broker concern: the embedded Apache Kafka broker and the one module that talks to any broker."""

from streamscale.broker.access import BrokerAccess, TopicNotFound
from streamscale.broker.embedded import EmbeddedBroker

__all__ = ["BrokerAccess", "EmbeddedBroker", "TopicNotFound"]
