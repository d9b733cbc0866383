"""Fresh ids drawn as Kafka's Uuid.randomUuid and DirectoryId.random draw them."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

from kafkawire.constants import METADATA_TOPIC_ID, ZERO_UUID
from kafkawire.uuids import random_directory_id, random_uuid
from raft.core.replica_key import uuid_from_str, uuid_to_str

DASHED = uuid_from_str("-" + "A" * 21)  # prints as '-AAAA...': an option on a command line
PLAIN = uuid_from_str("B" * 22)


def draws(*values: uuid.UUID) -> Iterator[uuid.UUID]:
    return iter(values)


def test_random_uuid_draws_again_for_a_reserved_or_dashed_id() -> None:
    assert uuid_to_str(DASHED).startswith("-")
    source = draws(ZERO_UUID, METADATA_TOPIC_ID, DASHED, PLAIN)
    assert random_uuid(lambda: next(source)) == PLAIN
    assert next(source, None) is None  # every one of them was drawn


def test_random_directory_id_skips_kafkas_first_hundred() -> None:
    lost, reserved_last = uuid.UUID(int=2), uuid.UUID(int=99)  # DirectoryId.LOST, the last one
    source = draws(lost, reserved_last, uuid.UUID(int=100))
    assert random_directory_id(lambda: next(source)) == uuid.UUID(int=100)


def test_no_drawn_id_prints_with_a_leading_dash() -> None:
    # One uuid4 in 64 starts with '-' in base64url: 3,000 plain draws hold ~47 of them.
    texts = [uuid_to_str(random_uuid()) for _ in range(1500)]
    texts += [uuid_to_str(random_directory_id()) for _ in range(1500)]
    assert not [t for t in texts if t.startswith("-")]
    assert len(set(texts)) == len(texts)
