"""Kafka's KRaftVersionRecord.json (v0), declared in kio's generated style because kio ships the
other Raft control record schemas but not this one.

No `from __future__ import annotations` here: kio's serializers read the field types at runtime.
"""


from kio.static.constants import EntityType
from kio.static.primitive import i16

from kafkawire.declared_schema import KafkaEntity, kafka_field, kafka_schema


@kafka_schema(EntityType.data, 0)
class KRaftVersionRecord(KafkaEntity):
    version: i16 = kafka_field("int16")
    """The version of the kraft version record."""
    k_raft_version: i16 = kafka_field("int16")
    """The kraft protocol version."""
