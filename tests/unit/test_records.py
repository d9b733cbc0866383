"""Metadata record encoding: golden bytes, round trips, versions, errors (ARCHITECTURE.md)."""

from __future__ import annotations

import uuid

import msgpack
import pytest

from metadata import records

U1 = uuid.UUID("00000000-0000-0000-0000-000000000001")
U2 = uuid.UUID("0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0")

SAMPLES: dict[str, records.MetadataRecord] = {
    "register_broker": records.RegisterBrokerRecord(
        1, U1, 42, (records.Endpoint("PLAINTEXT", "127.0.0.1", 9092),), None, True, False, (U2,)
    ),
    "unregister_broker": records.UnregisterBrokerRecord(1, 42),
    "topic": records.TopicRecord("foo", U2),
    "partition": records.PartitionRecord(
        0, U2, (1, 2, 3), (1, 2), (), (), 1, 0, 5, 7, (3,), (), -1
    ),
    "config": records.ConfigRecord(
        records.CONFIG_RESOURCE_TOPIC, "foo", "min.insync.replicas", "2"
    ),
    "partition_change": records.PartitionChangeRecord(
        0, U2, isr=(1,), eligible_leader_replicas=(2,)
    ),
    "fence_broker": records.FenceBrokerRecord(2, 17),
    "unfence_broker": records.UnfenceBrokerRecord(2, 17),
    "remove_topic": records.RemoveTopicRecord(U2),
    "feature_level": records.FeatureLevelRecord("metadata.version", 21),
    "broker_registration_change": records.BrokerRegistrationChangeRecord(
        2, 17, records.BROKER_FLAG_FALSE
    ),
    "noop": records.NoOpRecord(),
    "producer_ids": records.ProducerIdsRecord(2, 17, 3000),
}

GOLDEN_HEX = {
    "register_broker": (
        "93000088a962726f6b65725f696401ae696e6361726e6174696f6e5f6964c4100000000000000000"
        "0000000000000001ac62726f6b65725f65706f63682aa9656e64706f696e74739183a46e616d65a9"
        "504c41494e54455854a4686f7374a93132372e302e302e31a4706f7274cd2384a47261636bc0a666"
        "656e636564c3b6696e5f636f6e74726f6c6c65645f73687574646f776ec2a86c6f675f6469727391"
        "c4100f1e2d3c4b5a69788796a5b4c3d2e1f0"
    ),
    "unregister_broker": "93010082a962726f6b65725f696401ac62726f6b65725f65706f63682a",
    "topic": "93020082a46e616d65a3666f6fa8746f7069635f6964c4100f1e2d3c4b5a69788796a5b4c3d2e1f0",
    "partition": (
        "9303018dac706172746974696f6e5f696400a8746f7069635f6964c4100f1e2d3c4b5a69788796a5"
        "b4c3d2e1f0a87265706c6963617393010203a3697372920102b172656d6f76696e675f7265706c69"
        "63617390af616464696e675f7265706c6963617390a66c656164657201b56c65616465725f726563"
        "6f766572795f737461746500ac6c65616465725f65706f636805af706172746974696f6e5f65706f"
        "636807b8656c696769626c655f6c65616465725f7265706c696361739103ae6c6173745f6b6e6f77"
        "6e5f656c7290b16c6173745f6b6e6f776e5f6c6561646572ff"
    ),
    "config": (
        "93040084ad7265736f757263655f7479706502ad7265736f757263655f6e616d65a3666f6fa46e61"
        "6d65b36d696e2e696e73796e632e7265706c69636173a576616c7565a132"
    ),
    "partition_change": (
        "9305018bac706172746974696f6e5f696400a8746f7069635f6964c4100f1e2d3c4b5a69788796a5"
        "b4c3d2e1f0a36973729101a66c6561646572fea87265706c69636173c0b172656d6f76696e675f72"
        "65706c69636173c0af616464696e675f7265706c69636173c0b56c65616465725f7265636f766572"
        "795f7374617465ffb8656c696769626c655f6c65616465725f7265706c696361739102ae6c617374"
        "5f6b6e6f776e5f656c72c0b16c6173745f6b6e6f776e5f6c6561646572fe"
    ),
    "fence_broker": "93070082a2696402a565706f636811",
    "unfence_broker": "93080082a2696402a565706f636811",
    "remove_topic": "93090081a8746f7069635f6964c4100f1e2d3c4b5a69788796a5b4c3d2e1f0",
    "feature_level": (
        "930c0082a46e616d65b06d657461646174612e76657273696f6ead666561747572655f6c6576656c15"
    ),
    "broker_registration_change": (
        "93110085a962726f6b65725f696402ac62726f6b65725f65706f636811a666656e63656400b6696e"
        "5f636f6e74726f6c6c65645f73687574646f776effa86c6f675f64697273c0"
    ),
    "noop": "93140080",
    "producer_ids": (
        "930f0083a962726f6b65725f696402ac62726f6b65725f65706f636811b06e6578745f70726f6475"
        "6365725f6964cd0bb8"
    ),
}


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_golden_bytes_pin_the_encoding(name: str) -> None:
    assert records.encode_record(SAMPLES[name]).hex() == GOLDEN_HEX[name]


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_decode_inverts_encode(name: str) -> None:
    record = SAMPLES[name]
    assert records.decode_record(records.encode_record(record)) == record


def test_every_kafka_type_id_is_covered() -> None:
    ids = sorted(type(r).TYPE_ID for r in SAMPLES.values())
    assert ids == [0, 1, 2, 3, 4, 5, 7, 8, 9, 12, 15, 17, 20]


def test_partition_record_v0_loads_with_empty_elr() -> None:
    record = records.PartitionRecord(0, U2, (1, 2, 3), (1, 2), leader=1, leader_epoch=3)
    with_elr = records.PartitionRecord(
        0, U2, (1, 2, 3), (1, 2), leader=1, eligible_leader_replicas=(3,)
    )
    decoded = records.decode_record(records.encode_record(with_elr, version=0))
    assert isinstance(decoded, records.PartitionRecord)
    assert decoded.eligible_leader_replicas == ()
    assert decoded.last_known_elr == ()
    assert decoded.last_known_leader == -1
    assert records.decode_record(records.encode_record(record, version=0)) == record


def test_partition_change_record_v0_leaves_elr_unchanged() -> None:
    change = records.PartitionChangeRecord(0, U2, isr=(1,), eligible_leader_replicas=(2,))
    decoded = records.decode_record(records.encode_record(change, version=0))
    assert isinstance(decoded, records.PartitionChangeRecord)
    assert decoded.isr == (1,)
    assert decoded.eligible_leader_replicas is None
    assert decoded.last_known_leader == -2


def test_v0_bytes_with_v1_field_are_corrupt() -> None:
    raw = msgpack.packb(
        [
            3,
            0,
            {
                "partition_id": 0,
                "topic_id": U2.bytes,
                "replicas": [1],
                "isr": [1],
                "eligible_leader_replicas": [2],
            },
        ],
        use_bin_type=True,
    )
    with pytest.raises(records.CorruptRecordError):
        records.decode_record(raw)


def test_unknown_type_and_version_raise_unknown_record_error() -> None:
    with pytest.raises(records.UnknownRecordError):
        records.decode_record(msgpack.packb([99, 0, {}]))
    with pytest.raises(records.UnknownRecordError):
        records.decode_record(msgpack.packb([2, 5, {"name": "x", "topic_id": U1.bytes}]))
    with pytest.raises(records.UnknownRecordError):
        records.encode_record(records.TopicRecord("x", U1), version=3)


@pytest.mark.parametrize(
    "raw",
    [
        b"\xc1",  # never-used msgpack byte
        msgpack.packb([2, 0]),
        msgpack.packb({"type": 2}),
        msgpack.packb([2, 0, {"name": "x"}]),  # missing topic_id
        msgpack.packb([2, 0, {"name": "x", "topic_id": b"short"}]),
        msgpack.packb([2, 0, {"name": 7, "topic_id": U1.bytes}]),
        msgpack.packb([7, 0, {"id": True, "epoch": 1}]),  # bool is not an int id
        msgpack.packb([3, 1, {"partition_id": 0, "topic_id": U1.bytes, "replicas": 1, "isr": []}]),
        msgpack.packb([2, 0, {"name": "x", "topic_id": U1.bytes}]) + b"\x00",
        # issue 35's fast path checks list members too
        msgpack.packb([3, 0, {"partition_id": 0, "topic_id": U1.bytes, "replicas": [True],
                              "isr": [], "removing_replicas": [], "adding_replicas": [],
                              "leader": 1, "leader_recovery_state": 0, "leader_epoch": 0,
                              "partition_epoch": 0}]),
        msgpack.packb([5, 0, {"partition_id": 0, "topic_id": U1.bytes, "isr": [1, "2"],
                              "leader": -2, "replicas": None, "removing_replicas": None,
                              "adding_replicas": None, "leader_recovery_state": -1}]),
    ],
)
def test_malformed_bytes_raise_corrupt_record_error(raw: bytes) -> None:
    with pytest.raises(records.CorruptRecordError):
        records.decode_record(raw)


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_the_fast_decoder_gives_the_generic_paths_record(name: str) -> None:
    """Issue 35: decode_record's generated per-(type, version) decoders, every version of
    every sample, equal the generic field-by-field path; the hot records have one."""
    record = SAMPLES[name]
    cls = type(record)
    for version in range(cls.VERSION + 1):
        _, _, data = msgpack.unpackb(records.encode_record(record, version), raw=False)
        generic = records._decode_fields(cls, cls.TYPE_ID, version, data)
        fast = records._FAST_DECODERS[(cls.TYPE_ID, version)]
        if cls in (records.PartitionRecord, records.PartitionChangeRecord, records.TopicRecord):
            assert fast is not None
        if fast is not None:
            decoded = fast(data)
            assert decoded == generic and type(decoded) is cls
            assert hash(decoded) == hash(generic)


def test_record_to_json_uses_kafka_names_and_base64url_uuids() -> None:
    out = records.record_to_json(SAMPLES["partition"])
    assert out["type"] == "PARTITION_RECORD"
    assert out["version"] == 1
    assert out["data"]["topicId"] == "Dx4tPEtaaXiHlqW0w9Lh8A"
    assert out["data"]["eligibleLeaderReplicas"] == [3]
    assert out["data"]["lastKnownELR"] == []
    reg = records.record_to_json(SAMPLES["register_broker"])
    assert reg["type"] == "REGISTER_BROKER_RECORD"
    assert reg["data"]["endpoints"] == [{"name": "PLAINTEXT", "host": "127.0.0.1", "port": 9092}]
    assert reg["data"]["logDirs"] == ["Dx4tPEtaaXiHlqW0w9Lh8A"]
    noop = records.record_to_json(records.NoOpRecord())
    assert noop == {"type": "NO_OP_RECORD", "version": 0, "data": {}}


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_the_fast_encoder_gives_the_generic_paths_bytes(name: str) -> None:
    """encode_record at a record's own version is one generated function per type (issue 35:
    a fencing of 100,000 partitions encodes 100,000 records on the active controller's loop);
    its bytes are msgpack.packb's of the generic field loop, and an older version still takes
    the generic path."""
    import msgpack

    record = SAMPLES[name]
    cls = type(record)
    generic = msgpack.packb(
        [cls.TYPE_ID, cls.VERSION, records._encoded_fields(record, cls.VERSION)],
        use_bin_type=True,
    )
    assert records._FAST_ENCODERS[cls](record) == generic == records.encode_record(record)
    if cls.VERSION > 0:
        older = records.encode_record(record, 0)
        assert older == msgpack.packb(
            [cls.TYPE_ID, 0, records._encoded_fields(record, 0)], use_bin_type=True
        )
        assert len(older) < len(generic) or older != generic
