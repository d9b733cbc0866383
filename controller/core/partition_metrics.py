"""The controller's partition gauges (OfflinePartitionsCount, global_under_min_isr_partition_count,
manual_leader_election_required_partition_count, KIP-966's electable leaders per partition),
computed per topic and kept until the topic's image or its settings change.

A scrape walked every partition of the image: at 100,000 partitions, a second of the active
controller's loop per scrape (issue 35). Kafka keeps these counts incrementally
(ControllerMetricsChanges, applied per delta); here a topic no commit touched keeps its
TopicImage object (MetadataDelta copies only the topics it replays into), so its figures are
reused as they are.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass

from controller.core.config_control import unclean_allowed
from controller.core.unclean_recovery import Strategy, manual_election_required
from metadata.metadata_image import MetadataImage, TopicImage
from metadata.records import NO_LEADER


@dataclass(frozen=True, slots=True)
class _TopicFigures:
    topic: TopicImage  # the image these were computed from (compared by identity)
    settings: tuple[int, bool, Strategy | None]  # min.insync.replicas, unclean, strategy
    offline: int
    under_min_isr: int
    manual: int
    electable: tuple[tuple[int, int], ...]  # (partition, ISR + ELR) in partition order


class PartitionMetrics:
    def __init__(self) -> None:
        self._topics: dict[uuid.UUID, _TopicFigures] = {}

    def counts(
        self,
        image: MetadataImage,
        strategy_for: Callable[[str], Strategy | None] = lambda _: None,
        controller_id: int = -1,
    ) -> dict[str, int]:
        """OfflinePartitionsCount, global_under_min_isr_partition_count (rule 9's min ISR) and
        manual_leader_election_required_partition_count (KIP-966); `strategy_for(topic)` is the
        recovery manager's strategy, None while the manager is off; `controller_id` the active
        controller's (its node-level unclean setting, rule 15)."""
        offline = under_min_isr = manual = 0
        for figures in self._refresh(image, strategy_for, controller_id):
            offline += figures.offline
            under_min_isr += figures.under_min_isr
            manual += figures.manual
        return {
            "offline_partitions": offline,
            "under_min_isr_partitions": under_min_isr,
            "manual_leader_election_required_partitions": manual,
        }

    def electable_leaders(self, image: MetadataImage) -> list[tuple[str, int, int]]:
        """KIP-966's electable leaders: (topic, partition, size of ISR + ELR) per partition,
        in topic name then partition order."""
        by_name = {f.topic.name: f for f in self._refresh(image, lambda _: None, -1, keep=True)}
        return [
            (name, partition_id, count)
            for name in sorted(by_name)
            for partition_id, count in by_name[name].electable
        ]

    def _refresh(
        self,
        image: MetadataImage,
        strategy_for: Callable[[str], Strategy | None],
        controller_id: int,
        *,
        keep: bool = False,
    ) -> list[_TopicFigures]:
        """Every topic's figures, recomputed for a topic whose image or settings changed.
        `keep`: the caller reads only what does not depend on the settings (the electable
        leaders), so a cached entry of the same topic image serves as it is."""
        current: dict[uuid.UUID, _TopicFigures] = {}
        for topic_id, topic in image.topics.items():
            cached = self._topics.get(topic_id)
            if keep and cached is not None and cached.topic is topic:
                current[topic_id] = cached
                continue
            settings = (
                image.topic_min_insync_replicas(topic.name),
                unclean_allowed(image, topic.name, controller_id),
                strategy_for(topic.name),
            )
            if cached is None or cached.topic is not topic or cached.settings != settings:
                cached = _figures(topic, settings)
            current[topic_id] = cached
        self._topics = current
        return list(current.values())


def _figures(topic: TopicImage, settings: tuple[int, bool, Strategy | None]) -> _TopicFigures:
    min_isr, unclean, strategy = settings
    offline = under_min_isr = manual = 0
    electable = []
    for partition_id in sorted(topic.partitions):
        reg = topic.partitions[partition_id]
        if reg.leader == NO_LEADER:
            offline += 1
            if manual_election_required(reg, unclean, strategy):
                manual += 1
        if len(reg.isr) < min(min_isr, len(reg.replicas)):  # rule 9
            under_min_isr += 1
        electable.append((partition_id, len(reg.isr) + len(reg.elr)))
    return _TopicFigures(topic, settings, offline, under_min_isr, manual, tuple(electable))
