"""A broker's effective topic configs, cached per metadata image: a topic's own configs, then
this broker's and the cluster's dynamic ones, the config file, the defaults
(metadata.config_defs), and the write path's view of them (TopicWriteConfig)."""

from __future__ import annotations

from collections.abc import Mapping

from broker.core.topic_write_configs import TopicWriteConfig
from metadata.config_defs import BrokerLevels, effective_topic_configs
from metadata.metadata_image import CLUSTER_DEFAULT_RESOURCE, MetadataImage
from metadata.records import CONFIG_RESOURCE_BROKER, CONFIG_RESOURCE_TOPIC


class TopicConfigCache:
    def __init__(
        self, broker_id: int, static_configs: Mapping[str, str], node_defaults: Mapping[str, str]
    ) -> None:
        self._broker_id = broker_id
        self._static = static_configs
        self._node_defaults = node_defaults
        self._image: MetadataImage | None = None
        self._configs: dict[str, dict[str, str | None]] = {}
        self._write_configs: dict[str, TopicWriteConfig] = {}

    def topic_configs(self, image: MetadataImage, topic: str) -> dict[str, str | None]:
        """The topic's effective configs under `image`. Cached per topic until the image moves:
        opening a topic's 10,000 partitions asks 10,000 times."""
        self._follow(image)
        found = self._configs.get(topic)
        if found is None:
            found = self._configs[topic] = self._compute(image, topic)
        return dict(found)

    def write_config(self, image: MetadataImage, topic: str) -> TopicWriteConfig:
        """The topic's data configs for the write path, cached until the image moves."""
        self._follow(image)
        found = self._write_configs.get(topic)
        if found is None:
            found = TopicWriteConfig.from_configs(self.topic_configs(image, topic))
            self._write_configs[topic] = found
        return found

    def _follow(self, image: MetadataImage) -> None:
        if self._image is not image:
            self._configs = {}
            self._write_configs = {}
            self._image = image

    def _compute(self, image: MetadataImage, topic: str) -> dict[str, str | None]:
        levels = BrokerLevels(
            per_broker=image.configs.get((CONFIG_RESOURCE_BROKER, str(self._broker_id)), {}),
            cluster=image.configs.get((CONFIG_RESOURCE_BROKER, CLUSTER_DEFAULT_RESOURCE), {}),
            static=self._static,
            node_defaults=self._node_defaults,
        )
        return effective_topic_configs(image.configs.get((CONFIG_RESOURCE_TOPIC, topic), {}), levels)
