"""Topic names as Kafka's clients' org.apache.kafka.common.internals.Topic has them: the one
validator every path that takes a topic name asks (Metadata with and without auto-creation,
CreateTopics on the controller, DescribeConfigs, IncrementalAlterConfigs,
DescribeTopicPartitions), with InvalidTopicException's messages word for word, and the `.`/`_`
collision rule CreateTopics applies against existing topics."""

from __future__ import annotations

from collections.abc import Iterable

CLUSTER_METADATA_TOPIC = "__cluster_metadata"
GROUP_METADATA_TOPIC = "__consumer_offsets"
TRANSACTION_STATE_TOPIC = "__transaction_state"
SHARE_GROUP_STATE_TOPIC = "__share_group_state"
INTERNAL_TOPICS = frozenset({GROUP_METADATA_TOPIC, TRANSACTION_STATE_TOPIC, SHARE_GROUP_STATE_TOPIC})
MAX_NAME_LENGTH = 249
_LEGAL = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-")


def _java_length(name: str) -> int:
    """String.length() in Java: UTF-16 code units (a character outside the BMP counts two)."""
    return len(name.encode("utf-16-le")) // 2


def _why_invalid(name: str) -> str | None:
    """Kafka's detectInvalidTopic, check for check in its order."""
    if not name:
        return "the empty string is not allowed"
    if name == ".":
        return "'.' is not allowed"
    if name == "..":
        return "'..' is not allowed"
    if _java_length(name) > MAX_NAME_LENGTH:
        return f"the length of '{name}' is longer than the max allowed length {MAX_NAME_LENGTH}"
    if not set(name) <= _LEGAL:
        return (
            f"'{name}' contains one or more characters other than "
            "ASCII alphanumerics, '.', '_' and '-'"
        )
    return None


def invalid_topic_reason(name: str) -> str | None:
    """InvalidTopicException's message for `name` (answered with INVALID_TOPIC_EXCEPTION), or
    None for a legal name."""
    why = _why_invalid(name)
    return None if why is None else f"Topic name is invalid: {why}"


def is_valid(name: str) -> bool:
    return _why_invalid(name) is None


def is_internal(name: str) -> bool:
    return name in INTERNAL_TOPICS


def unify_collision_chars(name: str) -> str:
    """'.' and '_' collide in metric names: Kafka compares names with every '.' made '_'."""
    return name.replace(".", "_")


def colliding_topic(name: str, existing: Iterable[str]) -> str | None:
    """An existing topic `name` collides with (differs only by '.' against '_'), or None.
    `name` itself, existing, is no collision: that is TOPIC_ALREADY_EXISTS."""
    if "." not in name and "_" not in name:
        return None
    unified = unify_collision_chars(name)
    return min(
        (o for o in existing if o != name and unify_collision_chars(o) == unified), default=None
    )


def collision_message(name: str, existing: str) -> str:
    return f"Topic '{name}' collides with existing topic: {existing}"
