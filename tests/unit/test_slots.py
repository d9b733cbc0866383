"""kafkawire.slots: a frozen slotted dataclass built through its slots' descriptors."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import pytest

from kafkawire.slots import slot_constructor


@dataclass(frozen=True, slots=True)
class _Base:
    a: int


@dataclass(frozen=True, slots=True)
class _Child(_Base):
    b: tuple[int, ...] = ()
    c: str = field(default="x", compare=False)


def test_a_slot_constructor_builds_what_init_builds_and_it_stays_frozen() -> None:
    new = slot_constructor(_Child)
    built = new(1, (2, 3), "y")
    assert type(built) is _Child
    assert built == _Child(1, (2, 3), "y") and built.c == "y"
    assert hash(built) == hash(_Child(1, (2, 3), "z"))  # c is not compared
    with pytest.raises(dataclasses.FrozenInstanceError):
        built.a = 5  # type: ignore[misc]


def test_a_slot_constructor_needs_slots() -> None:
    @dataclass(frozen=True)
    class Plain:
        a: int

    with pytest.raises(TypeError, match="not a slot"):
        slot_constructor(Plain)
