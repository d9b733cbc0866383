"""Kafka's error table lives in the foundation package (`kafkawire.errors`); this name stays for
the modules that import it from here."""

from kafkawire.errors import Errors, KafkaError

__all__ = ["Errors", "KafkaError"]
