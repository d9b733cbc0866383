"""Building a frozen slotted dataclass through its slots' descriptors (pure, no I/O).

A frozen dataclass's generated __init__ sets each field by name through object.__setattr__,
which is about twice the cost of the slot descriptor's own setter (what object.__setattr__ ends
in) and more again when called with keywords. A core answering once per partition (a leader's
ISR proposal and its PartitionReady, 66,000 of each while a broker comes back; issue 35) builds
its frozen answers with `slot_constructor(cls)` instead: every field positionally, in
declaration order, no defaults and no __post_init__ (the caller passes what it would compute).
The object is the constructor's own: frozen (setattr still raises), equal to one built by
__init__ from the same values. kafkawire.codec's readers and the metadata records' fast decoders
build their frozen objects the same way.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

T = TypeVar("T")


def slot_constructor(cls: type[T], expected: Sequence[str] | None = None) -> Callable[..., T]:
    """`new(*values)`: a `cls` with each field, in declaration order, set to its value.
    `expected`: the field names the caller passes, in its order; a class declaring others (a
    schema of another library's, kio's) fails here, at import, not with values in the wrong
    fields."""
    names = [f.name for f in dataclasses.fields(cls)]  # type: ignore[arg-type]
    if expected is not None and list(expected) != names:
        raise TypeError(f"{cls.__name__} declares {names}, not {list(expected)}")
    env: dict[str, Any] = {"new": object.__new__, "cls": cls}
    for index, name in enumerate(names):
        descriptor: Any = next(
            (k.__dict__[name] for k in cls.__mro__ if name in k.__dict__), None
        )
        if type(descriptor).__name__ != "member_descriptor":
            raise TypeError(f"{cls.__name__}.{name} is not a slot")
        env[f"set{index}"] = descriptor.__set__
    args = [f"v{index}" for index in range(len(names))]
    source = "\n".join(
        [f"def new_{cls.__name__}({', '.join(args)}):", "    o = new(cls)"]
        + [f"    set{index}(o, v{index})" for index in range(len(names))]
        + ["    return o"]
    )
    exec(compile(source, f"<kafkawire.slots {cls.__qualname__}>", "exec"), env)
    constructor: Callable[..., T] = env[f"new_{cls.__name__}"]
    return constructor
