"""analytics.read.log_scan: a damaged batch with valid data after it is corruption, a damaged last
batch of a log is a torn tail; reading resumes at the next valid batch either way."""

from __future__ import annotations

from analytics.read.log_scan import CORRUPT, TORN, Damage, walk_batches
from storage.core.record_batch import BatchHeader, encode_batch


def _log(batches: int = 5) -> tuple[bytes, list[int]]:
    """Batches of three records each; returns the bytes and each batch's byte position."""
    data, positions = b"", []
    for i in range(batches):
        positions.append(len(data))
        data += encode_batch(3 * i, 1, 1000 + i, [b"value-%d-%d" % (i, r) for r in range(3)])
    return data, positions


def _split(items: list[tuple[BatchHeader, int] | Damage]
           ) -> tuple[list[int], list[Damage]]:
    good = [item[0].base_offset for item in items if not isinstance(item, Damage)]
    return good, [item for item in items if isinstance(item, Damage)]


def test_clean_log_has_no_damage() -> None:
    data, _ = _log()
    good, damage = _split(list(walk_batches(data, log_end=True)))
    assert good == [0, 3, 6, 9, 12] and damage == []


def test_flipped_payload_byte_mid_log_is_corruption_and_reading_resumes() -> None:
    data, positions = _log()
    flipped = bytearray(data)
    flipped[positions[2] + 50] ^= 0x01  # inside batch 2 (offsets 6..8), CRC-covered
    good, damage = _split(list(walk_batches(bytes(flipped), log_end=True)))
    assert good == [0, 3, 9, 12]  # the batches after it are still read
    (d,) = damage
    assert (d.kind, d.position, d.reason) == (CORRUPT, positions[2], "CRC32C mismatch")
    assert (d.claimed_base_offset, d.claimed_last_offset) == (6, 8)
    assert (d.after_offset, d.resumed_offset, d.resumed_position) == (5, 9, positions[3])


def test_flipped_length_byte_resynchronises_on_the_next_batch() -> None:
    data, positions = _log()
    flipped = bytearray(data)
    flipped[positions[1] + 8] ^= 0x40  # batch_length's high byte: the framing is gone
    good, damage = _split(list(walk_batches(bytes(flipped), log_end=True)))
    (d,) = damage
    assert d.kind == CORRUPT and d.position == positions[1]
    assert d.resumed_offset == 6 and good == [0, 6, 9, 12]


def test_cut_off_last_batch_is_a_torn_tail() -> None:
    data, positions = _log()
    good, damage = _split(list(walk_batches(data[:positions[4] + 20], log_end=True)))
    (d,) = damage
    assert d.kind == TORN and d.position == positions[4] and good == [0, 3, 6, 9]
    assert d.resumed_offset is None and d.after_offset == 11


def test_garbled_last_batch_is_a_torn_tail_but_not_in_a_sealed_segment() -> None:
    data, positions = _log()
    garbled = data[:positions[4] + 30] + bytes(len(data) - positions[4] - 30)  # zeroed pages
    (d,) = _split(list(walk_batches(garbled, log_end=True)))[1]
    assert d.kind == TORN and d.reason == "CRC32C mismatch"
    # The same bytes in an older segment: the log goes on in the next file, so it is bit rot.
    (sealed,) = _split(list(walk_batches(garbled, log_end=False)))[1]
    assert sealed.kind == CORRUPT


def test_base_offset_out_of_sequence_is_corruption() -> None:
    data, positions = _log(3)
    moved = bytearray(data)
    moved[positions[1] + 7] ^= 0x10  # base offset 3 -> 19: not CRC-covered, still detected
    good, damage = _split(list(walk_batches(bytes(moved), log_end=True)))
    (d,) = damage
    assert d.kind == CORRUPT and "does not follow 2" in d.reason and good == [0, 6]
