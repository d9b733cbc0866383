"""The voter set, keyed by ReplicaKey(id, directory_id) (INVARIANTS rule 4), and its history
over log offsets (rule 5: a change is in force once appended; truncation restores the old set)."""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field

from raft.core.control_records import Voter, VotersRecord
from raft.core.replica_key import ReplicaKey


@dataclass(frozen=True, slots=True)
class VoterSet:
    """Voters with their endpoints (listener name -> "host:port"), in insertion order."""

    voters: Mapping[ReplicaKey, Mapping[str, str]] = field(default_factory=dict)

    @classmethod
    def of(cls, voters: Iterable[Voter]) -> VoterSet:
        return cls({v.key: dict(v.endpoints) for v in voters})

    @classmethod
    def from_record(cls, record: VotersRecord) -> VoterSet:
        return cls.of(record.voters)

    def to_record(self) -> VotersRecord:
        return VotersRecord(tuple(Voter(k.id, k.directory_id, dict(e))
                                  for k, e in self.voters.items()))

    def __len__(self) -> int:
        return len(self.voters)

    def __iter__(self) -> Iterator[ReplicaKey]:
        return iter(self.voters)

    def __contains__(self, key: object) -> bool:
        return key in self.voters

    @property
    def majority_size(self) -> int:
        return len(self.voters) // 2 + 1

    def keys(self) -> list[ReplicaKey]:
        return list(self.voters)

    def ids(self) -> set[int]:
        return {k.id for k in self.voters}

    def key_for_id(self, voter_id: int) -> ReplicaKey | None:
        """The first voter key with this id (two may share it during a disk replacement)."""
        return next((k for k in self.voters if k.id == voter_id), None)

    def endpoint(self, voter_id: int) -> str | None:
        """The first endpoint of the voter with this id, or None if unknown."""
        for key, endpoints in self.voters.items():
            if key.id == voter_id and endpoints:
                return next(iter(endpoints.values()))
        return None

    def with_voter(self, key: ReplicaKey, endpoints: Mapping[str, str]) -> VoterSet:
        """This set plus key (rule 5: one voter at a time)."""
        return VoterSet({**self.voters, key: dict(endpoints)})

    def without_voter(self, key: ReplicaKey) -> VoterSet:
        return VoterSet({k: e for k, e in self.voters.items() if k != key})

    def is_majority(self, keys: Iterable[ReplicaKey]) -> bool:
        """Whether these voter keys (votes, acks) make a majority of this set."""
        return len(set(keys) & set(self.voters)) >= self.majority_size


class VoterSetHistory:
    """offset -> VoterSet. The set with the largest offset is in force (rule 5, KIP-853: not
    waiting for commit); the base set comes from the latest snapshot and is never truncated."""

    def __init__(self, base: VoterSet, base_offset: int = -1) -> None:
        self._offsets: list[int] = [base_offset]
        self._sets: list[VoterSet] = [base]

    def latest(self) -> VoterSet:
        return self._sets[-1]

    def latest_offset(self) -> int:
        return self._offsets[-1]

    def value_at(self, offset: int) -> VoterSet:
        """The set in force at offset (the last one recorded at or below it)."""
        index = bisect.bisect_right(self._offsets, offset) - 1
        return self._sets[max(index, 0)]

    def add_at(self, offset: int, voters: VoterSet) -> None:
        if offset <= self._offsets[-1]:
            raise ValueError(f"voter set at {offset} is not after {self._offsets[-1]}")
        self._offsets.append(offset)
        self._sets.append(voters)

    def truncate_to(self, offset: int) -> None:
        """Forget sets recorded at or above offset: the previous set is back in force (rule 5)."""
        while len(self._offsets) > 1 and self._offsets[-1] >= offset:
            self._offsets.pop()
            self._sets.pop()

    def changes(self) -> list[tuple[int, VoterSet]]:
        """(offset, set) for every set known, the base first (offset -1 or the snapshot's)."""
        return list(zip(self._offsets, self._sets, strict=True))

    def replaced_by_uncommitted(self, high_watermark: int) -> VoterSet | None:
        """The set the latest one replaced, if the latest is an uncommitted change (at or above
        the high watermark), else None: truncating that change would put it back (rule 5)."""
        if not self.has_uncommitted_change(high_watermark):
            return None
        return self._sets[-2]

    def has_uncommitted_change(self, high_watermark: int) -> bool:
        """Whether a voter change above the high watermark is pending (one at a time, rule 5)."""
        return len(self._offsets) > 1 and self._offsets[-1] >= high_watermark
