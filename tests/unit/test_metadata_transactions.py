"""KIP-868 metadata transactions in the MetadataLoader (issue 35): the records between a
BeginTransactionRecord and its EndTransactionRecord are published together, across as many
commits as they take; an AbortTransactionRecord drops them; nothing sees half of one (Kafka's
MetadataBatchLoader)."""

from __future__ import annotations

import uuid

from metadata.loader import LoaderManifest, MetadataLoader
from metadata.metadata_image import MetadataDelta, MetadataImage
from metadata.records import (
    AbortTransactionRecord,
    BeginTransactionRecord,
    EndTransactionRecord,
    PartitionRecord,
    TopicRecord,
    decode_record,
    encode_record,
)
from tests.metadata_batches import batches

A = uuid.UUID(int=1)
B = uuid.UUID(int=2)


class Seen:
    name = "Seen"

    def __init__(self) -> None:
        self.updates: list[tuple[int, int, frozenset[str]]] = []

    def on_metadata_update(
        self, delta: MetadataDelta, image: MetadataImage, manifest: LoaderManifest
    ) -> None:
        topics = frozenset(image.topics_by_name)
        self.updates.append((manifest.end_offset, delta.records, topics))


def loader_with_seen() -> tuple[MetadataLoader, Seen]:
    loader = MetadataLoader()
    seen = Seen()
    loader.install_publishers([seen])
    return loader, seen


def test_markers_round_trip_with_kafkas_type_ids() -> None:
    for record, type_id in ((BeginTransactionRecord("CreateTopics"), 23),
                            (EndTransactionRecord(), 24),
                            (AbortTransactionRecord("Controller failover"), 25)):
        assert type_id == type(record).TYPE_ID
        assert decode_record(encode_record(record)) == record


def test_a_transaction_over_two_commits_is_published_whole_at_its_end() -> None:
    loader, seen = loader_with_seen()
    # offset 0: a topic before the transaction, published at once (before the Begin)
    loader.handle_commit(batches(0, 1, [TopicRecord("a", A), BeginTransactionRecord("big"),
                                        TopicRecord("b", B)]))
    assert seen.updates == [(1, 1, frozenset({"a"}))]
    assert loader.in_transaction and loader.committed_offset == 1
    loader.handle_commit(batches(3, 1, [PartitionRecord(0, B, (1,), (1,), leader=1)]))
    assert len(seen.updates) == 1 and "b" not in loader.image.topics_by_name
    loader.handle_commit(batches(4, 1, [PartitionRecord(1, B, (1,), (1,), leader=1),
                                        EndTransactionRecord()]))
    assert not loader.in_transaction
    assert seen.updates[-1] == (6, 3, frozenset({"a", "b"}))  # TopicRecord + 2 partitions
    assert loader.committed_offset == 6
    assert sorted(loader.image.topics_by_name["b"].partitions) == [0, 1]


def test_an_aborted_transaction_is_never_applied() -> None:
    loader, seen = loader_with_seen()
    loader.handle_commit(batches(0, 1, [BeginTransactionRecord("big"), TopicRecord("b", B)]))
    assert seen.updates == [] and loader.committed_offset == 0
    loader.handle_commit(batches(2, 2, [AbortTransactionRecord("Controller failover"),
                                        TopicRecord("a", A)]))
    assert not loader.in_transaction
    assert seen.updates == [(4, 1, frozenset({"a"}))]
    assert set(loader.image.topics_by_name) == {"a"}


def test_a_loaded_snapshot_ends_an_open_transaction() -> None:
    loader, _seen = loader_with_seen()
    loader.handle_commit(batches(0, 1, [BeginTransactionRecord("big"), TopicRecord("b", B)]))
    loader.handle_load_snapshot(10, batches(0, 1, [TopicRecord("a", A)]))
    assert not loader.in_transaction and set(loader.image.topics_by_name) == {"a"}
    loader.handle_commit(batches(10, 1, [TopicRecord("c", uuid.UUID(int=3))]))
    assert set(loader.image.topics_by_name) == {"a", "c"}


def test_markers_out_of_place_are_ignored_and_the_log_goes_on() -> None:
    """An End or Abort with no transaction open, a Begin inside one: logged, skipped."""
    loader, seen = loader_with_seen()
    loader.handle_commit(batches(0, 1, [EndTransactionRecord(), TopicRecord("a", A)]))
    assert seen.updates[-1][2] == frozenset({"a"})
    loader.handle_commit(batches(2, 1, [BeginTransactionRecord("x"), BeginTransactionRecord("y"),
                                        TopicRecord("b", B), EndTransactionRecord()]))
    assert set(loader.image.topics_by_name) == {"a", "b"} and not loader.in_transaction
