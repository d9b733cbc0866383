"""Fresh ids as Apache Kafka draws them: `Uuid.randomUuid` for cluster and topic ids,
`DirectoryId.random` for log and metadata directories (KIP-858/856). Neither is ever a reserved
id, nor one whose base64url form starts with '-': such an id given to a command line
(`--cluster-id -x...`, `--controller-directory-id -x...`) would read as an option, in Kafka's
own tools too."""

from __future__ import annotations

import uuid
from collections.abc import Callable

from kafkawire.constants import METADATA_TOPIC_ID, ZERO_UUID

# Uuid.RESERVED: never a random id.
_RESERVED = frozenset({ZERO_UUID, METADATA_TOPIC_ID})
# DirectoryId.reserved: the first 100 ids (MIGRATING, UNASSIGNED, LOST and room for more).
_DIRECTORY_RESERVED_BELOW = 100
# A base64url text starts with '-' when the id's first six bits are 62.
_DASH_SEXTET = 62


def _starts_with_dash(value: uuid.UUID) -> bool:
    return value.bytes[0] >> 2 == _DASH_SEXTET


def random_uuid(draw: Callable[[], uuid.UUID] = uuid.uuid4) -> uuid.UUID:
    """Kafka's Uuid.randomUuid: draws again while the id is reserved or prints as '-...'."""
    value = draw()
    while value in _RESERVED or _starts_with_dash(value):
        value = draw()
    return value


def random_directory_id(draw: Callable[[], uuid.UUID] = uuid.uuid4) -> uuid.UUID:
    """Kafka's DirectoryId.random: a random_uuid outside the first 100 ids."""
    value = random_uuid(draw)
    while value.int < _DIRECTORY_RESERVED_BELOW:
        value = random_uuid(draw)
    return value
