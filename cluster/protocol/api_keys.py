"""Kafka's api keys live in the foundation package (`kafkawire.api_keys`); this name stays for
the modules that import them from here."""

from kafkawire.api_keys import ApiKey

__all__ = ["ApiKey"]
