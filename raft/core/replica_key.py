"""Voters are keyed by (id, directory id): KIP-856's storage UUID (INVARIANTS rule 4)."""

from __future__ import annotations

import base64
import uuid
from typing import NamedTuple

# Kafka's "no directory id" (Uuid.ZERO_UUID): an old voter or a replica that did not send one.
from kafkawire.constants import ZERO_UUID


def uuid_to_str(value: uuid.UUID) -> str:
    """Kafka prints a UUID as 22 characters of unpadded base64url."""
    return base64.urlsafe_b64encode(value.bytes).decode("ascii").rstrip("=")


def uuid_from_str(text: str) -> uuid.UUID:
    """Parse Kafka's 22-char base64url form; the dashed hex form is accepted too."""
    text = text.strip()
    if len(text) == 22:
        return uuid.UUID(bytes=base64.urlsafe_b64decode(text + "=="))
    return uuid.UUID(text)


class ReplicaKey(NamedTuple):
    id: int
    directory_id: uuid.UUID = ZERO_UUID

    def __str__(self) -> str:
        return f"{self.id}@{uuid_to_str(self.directory_id)}"
