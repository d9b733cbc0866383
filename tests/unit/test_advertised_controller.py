"""What a KRaft broker names as "controller" in Metadata and DescribeCluster (issue 36): a
random registered, unfenced broker, or -1 while there is none, as Kafka's
KRaftMetadataCache.getRandomAliveBroker; never a fenced broker (itself while it starts), which
librdkafka's admin client cannot find among the brokers listed and waits for until its request
times out."""

from __future__ import annotations

from broker.runtime.kafka_admin_apis import NO_CONTROLLER_ID, advertised_controller_id
from metadata.metadata_image import MetadataImage
from tests.unit.test_cluster_control import Cluster


def test_only_unfenced_brokers_are_named_controller() -> None:
    cluster = Cluster()
    assert advertised_controller_id(MetadataImage()) == NO_CONTROLLER_ID
    for broker in (1, 2, 3):
        cluster.register(broker)  # registered, still fenced
    assert advertised_controller_id(cluster.image) == NO_CONTROLLER_ID
    assert cluster.heartbeat(2).is_fenced is False
    assert {advertised_controller_id(cluster.image) for _ in range(20)} == {2}
    assert cluster.heartbeat(3).is_fenced is False
    named = {advertised_controller_id(cluster.image) for _ in range(200)}
    assert named == {2, 3}  # random among the live ones, as Kafka spreads admin requests
