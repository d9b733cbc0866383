"""A broker's effective topic configs, cached per metadata image: a topic's own configs, then
this broker's and the cluster's dynamic ones, the config file, the defaults
(metadata.config_defs), and the write path's view of them (TopicWriteConfig)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from broker.core.topic_write_configs import TopicWriteConfig
from metadata.config_defs import PREALLOCATE, SEGMENT_BYTES, BrokerLevels, effective_topic_configs
from metadata.metadata_image import CLUSTER_DEFAULT_RESOURCE, MetadataImage
from metadata.records import CONFIG_RESOURCE_BROKER, CONFIG_RESOURCE_TOPIC
from storage.core.log_retention import RetentionConfig
from storage.runtime.disk_log import DEFAULT_SEGMENT_BYTES


@dataclass(frozen=True, slots=True)
class LogSettings:
    """What a partition log takes from its topic's configs when it opens or they change."""

    segment_bytes: int
    preallocate: bool
    retention: RetentionConfig

    @classmethod
    def from_configs(cls, configs: Mapping[str, str | None]) -> LogSettings:
        return cls(
            int(configs[SEGMENT_BYTES] or DEFAULT_SEGMENT_BYTES),
            configs[PREALLOCATE] == "true",
            RetentionConfig.from_configs(configs),
        )


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
        self._log_settings: dict[str, LogSettings] = {}

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

    def log_settings(self, image: MetadataImage, topic: str) -> LogSettings:
        """The topic's log settings, cached until the image moves: a new topic's 5,000
        partitions copied and parsed its configs once each (issue 35)."""
        self._follow(image)
        found = self._log_settings.get(topic)
        if found is None:
            found = self._log_settings[topic] = LogSettings.from_configs(
                self.topic_configs(image, topic)
            )
        return found

    def _follow(self, image: MetadataImage) -> None:
        if self._image is not image:
            self._configs = {}
            self._write_configs = {}
            self._log_settings = {}
            self._image = image

    def _compute(self, image: MetadataImage, topic: str) -> dict[str, str | None]:
        levels = BrokerLevels(
            per_broker=image.configs.get((CONFIG_RESOURCE_BROKER, str(self._broker_id)), {}),
            cluster=image.configs.get((CONFIG_RESOURCE_BROKER, CLUSTER_DEFAULT_RESOURCE), {}),
            static=self._static,
            node_defaults=self._node_defaults,
        )
        return effective_topic_configs(image.configs.get((CONFIG_RESOURCE_TOPIC, topic), {}), levels)
