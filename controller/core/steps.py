"""Steps: a controller decision that gives its caller the turn between slices (issue 35).

A decision over a big image (fencing a broker of 100,000 partitions, creating 5,000) is a
generator that yields between slices and returns its ControllerResult; the active controller's
runtime drives it on its event loop and serves Raft's fetches, votes and heartbeats at every
yield (a worker thread would not help: pure Python holds the GIL). Tests and small callers
`drain` it in one go, or call its `drained` form.
"""

from __future__ import annotations

# The generator shape and its one-go forms are the wire layer's, shared with the broker's core.
from kafkawire.steps import Steps, drain, drained

__all__ = ["SLICE_PARTITIONS", "SLICE_SCANNED", "Steps", "drain", "drained"]

# Partitions a decision builds a change for between two yields: about 5 ms of
# PartitionChangeBuilder work on an idle core.
SLICE_PARTITIONS = 200
# Partitions it only looks at (and skips) between two yields.
SLICE_SCANNED = 5_000
