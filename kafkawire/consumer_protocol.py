"""Kafka's ConsumerProtocol payloads that the group coordinator reads: the topics of a
ConsumerProtocolSubscription (the JoinGroup metadata of protocol type "consumer").

Every version starts with version 0's layout (int16 version, then [topic] as int16-length
strings), so the coordinator reads that prefix whatever the version, as Kafka's ClassicGroup
does; what follows (user data, owned partitions, rack) is ignored.
"""

from __future__ import annotations

import struct

CONSUMER_PROTOCOL_TYPE = "consumer"


def subscription_topics(data: bytes) -> list[str]:
    """The subscribed topics; ValueError when the bytes are not a subscription."""
    try:
        (count,) = struct.unpack_from(">i", data, 2)  # after the int16 version
        position = 6
        topics = []
        for _ in range(count):
            (length,) = struct.unpack_from(">h", data, position)
            position += 2
            if length < 0 or position + length > len(data):
                raise ValueError("a topic name runs past the subscription")
            topics.append(data[position : position + length].decode())
            position += length
    except (struct.error, UnicodeDecodeError) as exc:
        raise ValueError(f"not a consumer subscription: {exc}") from exc
    if count < 0:
        raise ValueError("a negative topic count")
    return topics
