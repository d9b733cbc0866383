"""KIP-227 incremental fetch sessions, both ends (Kafka's FetchSession.scala on the leader,
FetchSessionHandler.java on the fetcher), so a follower of 33,000 partitions does not send and
receive 33,000 partitions every round: after one full Fetch, a request names only the partitions
whose fetch position changed (and those to forget), an answer only the partitions with something
new (records, an error, a diverging epoch, a moved high watermark or log start offset).

Pure: the clock and the session id come in as arguments.

The leader's side: a FetchSessionCache of max.incremental.fetch.session.cache.slots sessions.
A request with epoch INITIAL (0) is a full fetch that opens a session when a slot is free or one
can be evicted (FetchSessionCache.tryEvict: a session unused for
min.incremental.fetch.session.eviction.ms first, else a non-follower session smaller than the new
one; followers' sessions are privileged); FINAL (-1) is a sessionless full fetch and closes the
named session; any other epoch is incremental: FETCH_SESSION_ID_NOT_FOUND for an unknown id,
INVALID_FETCH_SESSION_EPOCH for the wrong epoch, otherwise the session's partitions are updated
from the request, the forgotten ones dropped, and the epoch moves on.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Hashable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from kafkawire.errors import Errors
from kafkawire.steps import drained

INITIAL_EPOCH = 0
FINAL_EPOCH = -1
INVALID_SESSION_ID = 0
DEFAULT_CACHE_SLOTS = 1000  # max.incremental.fetch.session.cache.slots
DEFAULT_EVICTION_MS = 120_000  # min.incremental.fetch.session.eviction.ms
# Partitions a session takes from a request between two yields of new_context_steps: a
# follower's Fetch after a create names its 5,000 new partitions, 15 ms of CPU in one stretch
# on the leader's loop (issue 35). About 0.3 ms.
UPDATE_SLICE_PARTITIONS = 100

PartitionKey = tuple[Hashable, int]  # (topic id or name, partition)


def next_epoch(epoch: int) -> int:
    """FetchMetadata.nextEpoch: wraps past Integer.MAX_VALUE to 1, never to 0 or -1."""
    if epoch < 0:
        return FINAL_EPOCH
    return 1 if epoch >= (1 << 31) - 1 else epoch + 1


# ---- the leader's side ----


@dataclass(slots=True)
class CachedPartition:
    """What the session knows of one partition: the fetcher's last request for it (`request`,
    the wire's partition entry, kept as it came) and what the last answer said (so an
    incremental answer leaves out a partition with nothing new).

    `idle`: a follower's session skips reading it (see FetchSession.skip); `replay`: the
    follower sent it again while it was skipped, so the fetches skipped meanwhile are counted
    before the next read (PartitionState.on_follower_idle)."""

    topic: Any  # the request's topic entry (its id or name)
    request: Any
    high_watermark: int = -1
    log_start_offset: int = -1
    idle: bool = False
    replay: bool = False


@dataclass(slots=True)
class FetchSession:
    """One session. A follower's session (issue 35) reads only its `busy` partitions: a
    partition with nothing new for the follower (caught up, in the ISR, its answer what the
    session last said) is skipped (`skip`) until it changes on the leader (`wake`) or the
    follower sends it again (`update`). Kafka reads every partition of a session at every
    Fetch and leaves the unchanged ones out of the answer; the answer is the same here, but a
    follower's session of 33,000 idle partitions cost a Python leader a second of CPU a
    round."""

    session_id: int
    privileged: bool  # a follower's
    epoch: int
    last_used_ms: int
    partitions: dict[PartitionKey, CachedPartition] = field(default_factory=dict)
    # The partitions the next read reads: every one but the skipped (idle) ones.
    busy: dict[PartitionKey, CachedPartition] = field(default_factory=dict)
    replica_id: int = -1  # the follower's broker id
    fetch_ms: int = 0  # when the follower's latest request arrived (its first read)
    parked: Any = None  # the runtime's: what this session's waiting fetches park on

    def update(self, topics: Iterable[tuple[Any, Any]], forgotten: Iterable[PartitionKey]) -> None:
        for _ in self.update_steps(topics, forgotten):
            pass

    def update_steps(
        self, topics: Iterable[tuple[Any, Any]], forgotten: Iterable[PartitionKey]
    ) -> Iterator[None]:
        """update, yielding every UPDATE_SLICE_PARTITIONS partitions."""
        partitions, busy = self.partitions, self.busy
        for count, (topic, request) in enumerate(topics, 1):
            key = (_topic_key(topic), int(request.partition))
            cached = partitions.get(key)
            if cached is None:
                cached = partitions[key] = CachedPartition(topic, request)
            else:
                cached.request = request
                if cached.idle:
                    cached.idle, cached.replay = False, True
            busy[key] = cached
            if count % UPDATE_SLICE_PARTITIONS == 0:
                yield
        for key in forgotten:
            partitions.pop(key, None)
            busy.pop(key, None)

    def skip(self, key: PartitionKey, cached: CachedPartition) -> None:
        """Reads skip `key` from now on: its last read found nothing new for the follower."""
        if self.partitions.get(key) is cached:
            cached.idle = True
            self.busy.pop(key, None)

    def wake(self, key: PartitionKey) -> bool:
        """`key` changed on the leader: read it again. True if it was skipped until now."""
        cached = self.partitions.get(key)
        if cached is None or not cached.idle:
            return False
        cached.idle = False
        self.busy[key] = cached
        return True


def cached_key(cached: CachedPartition) -> PartitionKey:
    """The session's key of a cached partition."""
    return (_topic_key(cached.topic), int(cached.request.partition))


def _topic_key(topic: Any) -> Hashable:
    name = getattr(topic, "topic", None)
    return name if name is not None else topic.topic_id


@dataclass(frozen=True, slots=True)
class FetchContext:
    """How one Fetch is answered: the partitions to read, in order (the session's, for an
    incremental fetch), whether the answer leaves out partitions with nothing new, and the
    session id the answer carries (0: none)."""

    error: Errors
    session_id: int
    partitions: list[CachedPartition]
    incremental: bool
    session: FetchSession | None


class FetchSessionCache:
    def __init__(
        self,
        max_slots: int = DEFAULT_CACHE_SLOTS,
        eviction_ms: int = DEFAULT_EVICTION_MS,
    ) -> None:
        self.max_slots = max_slots
        self.eviction_ms = eviction_ms
        self.sessions: dict[int, FetchSession] = {}

    def __len__(self) -> int:
        return len(self.sessions)

    def new_context_steps(
        self,
        session_id: int,
        epoch: int,
        topics: list[tuple[Any, Any]],
        forgotten: list[PartitionKey],
        *,
        privileged: bool,
        now_ms: int,
        new_session_id: Callable[[], int],
    ) -> Generator[None, None, FetchContext]:
        """new_context in slices (the runtime gives its loop back at the yields), returning
        the context. A session's epoch moves on before its partitions are taken, so no other
        request can use the epoch meanwhile; one evicted meanwhile is answered from, then
        unknown to the follower's next Fetch (FETCH_SESSION_ID_NOT_FOUND: a full one)."""
        if epoch in (FINAL_EPOCH, INITIAL_EPOCH):
            if session_id != INVALID_SESSION_ID:
                self.sessions.pop(session_id, None)  # the fetcher closes its session
            full = []
            for count, (topic, request) in enumerate(topics, 1):
                full.append(CachedPartition(topic, request))
                if count % UPDATE_SLICE_PARTITIONS == 0:
                    yield
            if epoch == FINAL_EPOCH:
                return FetchContext(Errors.NONE, INVALID_SESSION_ID, full, False, None)
            session = self._create(privileged, len(full), now_ms, new_session_id)
            if session is None:
                return FetchContext(Errors.NONE, INVALID_SESSION_ID, full, False, None)
            yield from session.update_steps(topics, ())
            return FetchContext(
                Errors.NONE, session.session_id, list(session.partitions.values()), False,
                session,
            )
        session = self.sessions.get(session_id)
        if session is None:
            return FetchContext(
                Errors.FETCH_SESSION_ID_NOT_FOUND, INVALID_SESSION_ID, [], False, None
            )
        if session.epoch != epoch:
            return FetchContext(
                Errors.INVALID_FETCH_SESSION_EPOCH, INVALID_SESSION_ID, [], False, None
            )
        session.epoch = next_epoch(session.epoch)
        session.last_used_ms = now_ms
        yield from session.update_steps(topics, forgotten)
        return FetchContext(
            Errors.NONE, session.session_id, list(session.partitions.values()), True, session
        )

    # Kafka's FetchManager.newContext, in one go.
    new_context = drained(new_context_steps)

    def _create(
        self, privileged: bool, size: int, now_ms: int, new_session_id: Callable[[], int]
    ) -> FetchSession | None:
        if len(self.sessions) >= self.max_slots and not self._try_evict(privileged, size, now_ms):
            return None
        session_id = new_session_id()
        while session_id == INVALID_SESSION_ID or session_id in self.sessions:
            session_id = new_session_id()
        session = FetchSession(session_id, privileged, next_epoch(INITIAL_EPOCH), now_ms)
        self.sessions[session_id] = session
        return session

    def _try_evict(self, privileged: bool, size: int, now_ms: int) -> bool:
        """FetchSessionCache.tryEvict: a stale session first, else the least valuable
        non-follower session if the new one is a follower's or larger."""
        if not self.sessions:
            return False
        stale = min(self.sessions.values(), key=lambda s: s.last_used_ms)
        if now_ms - stale.last_used_ms >= self.eviction_ms:
            del self.sessions[stale.session_id]
            return True
        candidates = [s for s in self.sessions.values() if not s.privileged]
        if not candidates:
            return False
        weakest = min(candidates, key=lambda s: (len(s.partitions), s.last_used_ms))
        if privileged or len(weakest.partitions) < size:
            del self.sessions[weakest.session_id]
            return True
        return False


def answer_changed(cached: CachedPartition, error_code: int, has_news: bool,
                   high_watermark: int, log_start_offset: int) -> bool:
    """FetchSession's maybeUpdateResponseData: whether an incremental answer carries this
    partition (and, as a side effect, the session remembers what the answer says)."""
    changed = (
        has_news
        or error_code != 0
        or high_watermark != cached.high_watermark
        or log_start_offset != cached.log_start_offset
    )
    cached.high_watermark = high_watermark
    cached.log_start_offset = log_start_offset
    return changed


# ---- the fetcher's side ----


@dataclass(frozen=True, slots=True)
class SentPartition:
    """What the fetcher told the session of one partition (FetchRequest.PartitionData)."""

    fetch_offset: int
    current_leader_epoch: int
    last_fetched_epoch: int
    max_bytes: int


@dataclass(frozen=True, slots=True)
class FetchPlan:
    """One request of the session: its id and epoch, the partitions it must name (all of them
    in a full fetch; the changed and the new ones otherwise), and those to forget."""

    session_id: int
    epoch: int
    send: list[PartitionKey]
    forget: list[PartitionKey]

    @property
    def full(self) -> bool:
        return self.epoch in (INITIAL_EPOCH, FINAL_EPOCH)


class FetchSessionHandler:
    """The fetcher's end of one session with one leader (Kafka's FetchSessionHandler).

    `build_changes` is `build` for a fetcher that knows which partitions may have changed since
    its last request: a round costs what changed, not the session's size (issue 35: a follower
    of 33,000 partitions rebuilt and compared all of them every round)."""

    def __init__(self) -> None:
        self.session_id = INVALID_SESSION_ID
        self.epoch = INITIAL_EPOCH
        self.session: dict[PartitionKey, SentPartition] = {}
        self._pending: dict[PartitionKey, SentPartition] = {}  # a full request's partitions
        self._sent: dict[PartitionKey, SentPartition] = {}  # an incremental one's changes

    def build(self, wanted: dict[PartitionKey, SentPartition]) -> FetchPlan:
        """The next request for `wanted` (every partition the fetcher fetches now)."""
        if self._full_next():
            return self._full(wanted)
        changed = [key for key, data in wanted.items() if self.session.get(key) != data]
        changed.extend(key for key in self.session if key not in wanted)
        return self._incremental(wanted, changed)

    def build_changes(
        self, wanted: Mapping[PartitionKey, SentPartition], changed: Iterable[PartitionKey]
    ) -> FetchPlan:
        """The next request for `wanted`, where only the partitions in `changed` may differ
        from the session (moved, added, or no longer wanted)."""
        if self._full_next():
            return self._full(wanted)
        return self._incremental(wanted, changed)

    def _full_next(self) -> bool:
        return self.epoch == INITIAL_EPOCH or self.session_id == INVALID_SESSION_ID

    def _full(self, wanted: Mapping[PartitionKey, SentPartition]) -> FetchPlan:
        self._pending = dict(wanted)
        self._sent = {}
        return FetchPlan(self.session_id, INITIAL_EPOCH, list(wanted), [])

    def _incremental(
        self, wanted: Mapping[PartitionKey, SentPartition], changed: Iterable[PartitionKey]
    ) -> FetchPlan:
        session = self.session
        sent: dict[PartitionKey, SentPartition] = {}
        forget = []
        for key in changed:
            data = wanted.get(key)
            if data is None:
                if key in session:
                    forget.append(key)
            elif session.get(key) != data:
                sent[key] = data
        self._sent = sent
        return FetchPlan(self.session_id, self.epoch, list(sent), forget)

    def handle_response(self, error: Errors, session_id: int, plan: FetchPlan) -> None:
        """FetchSessionHandler.handleResponse: the session moves on, or starts again."""
        if error is not Errors.NONE:
            # FETCH_SESSION_ID_NOT_FOUND, INVALID_FETCH_SESSION_EPOCH, or any other: the next
            # request is a full one (a new session; the old one closed if it still exists).
            self.handle_error()
            return
        if plan.full:
            self.session_id = session_id
            self.epoch = next_epoch(INITIAL_EPOCH) if session_id else INITIAL_EPOCH
            self.session = self._pending if session_id else {}
            self._pending = {}
            return
        self.session.update(self._sent)
        for key in plan.forget:
            self.session.pop(key, None)
        self.epoch = next_epoch(self.epoch)

    def handle_error(self) -> None:
        """A request that failed (no answer): the next one opens a new session
        (FetchSessionHandler.handleError)."""
        self.epoch = INITIAL_EPOCH
        self.session = {}
