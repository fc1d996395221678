"""The task store's interface: what a hub replica keeps and shares about tasks.

Every method is one atomic step, so a store shared by replicas (Redis) can
implement each as one transaction or script: the idempotency claim is a
set-if-absent, a task's end is a compare-and-set on its state (exactly one
final state), the per-tenant+agent index is ordered by creation (a sorted
set), each task's events are an append-only log read from an offset (a
stream) that expires ``retention_secs`` after the task ended, and cancel
marks let one replica ask the replica running a task to stop it.

Records (``HubTask``) come out of a store as values: a caller never changes
one in place, it asks the store (``start``, ``end``, ``set_artifacts``).

The methods that name a task by its id alone, from a replica that may not run it
(``events``, ``has_events``, ``final_event``, ``mark_cancel``, ``cancel_marked``),
take its ``tenant``: a shared store keeps a tenant's tasks apart (on Redis, in its
tenant's slot) and finds one by id only with it, or when this replica created the
task and still runs it. The memory store finds every task by id.
"""
from __future__ import annotations

import abc
import contextlib
import logging
import threading
from dataclasses import dataclass

# StoreError: the store cannot be reached in time; one of the errors the hub answers.
from murmur_wsgi.errors import StoreError


class StoreRefused(Exception):
    """Redis refused the store URL's user or password as the store opened (a Redis Cluster,
    whose slot map is read then): the setting's fault, not an outage. Its message is
    public (no URL, no password); the hub raises it as ``ConfigError`` naming ``store``."""


def each_then_raise(calls) -> None:
    """Call each of ``calls``: one that fails with ``StoreError`` does not keep the others
    from theirs (a Redis Cluster serving without one primary fails only the calls that
    reach its tenants); the first failure is raised after them."""
    failed = None
    for call in calls:
        try:
            call()
        except StoreError as ex:
            failed = failed or ex
    if failed is not None:
        raise failed


# NOTE: the threads (greenlets, under gevent) inside ``retried_quietly``, by their ident: a
# threading.local made as this module loads (gunicorn's master loads it, before the worker
# patches threading) would be one for every greenlet of the worker.
_quiet: set[int] = set()


@contextlib.contextmanager
def retried_quietly():
    """The store's calls made inside, on this thread, are a background loop's, which
    logs an outage itself: one line as it starts, one as it ends. The store logs their
    failures at DEBUG, not one line per retry (``retrying_quietly``)."""
    ident = threading.get_ident()
    if ident in _quiet:
        yield
        return
    _quiet.add(ident)
    try:
        yield
    finally:
        _quiet.discard(ident)


def retrying_quietly() -> bool:
    """Whether this thread's store calls are a background loop's (``retried_quietly``)."""
    return threading.get_ident() in _quiet


logger = logging.getLogger(__name__)

PENDING = "pending"          # claim_message: the first message with this id has no task yet


@dataclass(frozen=True, slots=True)
class StoredEvent:
    """One event of a task's log: its position, its StreamResponse JSON, and whether it ends it."""

    seq: int
    payload: str
    terminal: bool = False


class Written(list):
    """The payloads a task's end wrote (``TaskStore.end``); ``wire``: the finished task's
    JSON as GetTask answers it, when the store had it at hand (else None)."""

    __slots__ = ("wire",)

    def __init__(self, payloads=(), wire: str | None = None):
        super().__init__(payloads)
        self.wire = wire


class Opened:
    """What ``TaskStore.open`` did: ``found`` (the messageId names a task already, or is
    PENDING: nothing done), ``refused`` (admission refused, CONCURRENCY or RATE: nothing
    stored), else the task is stored and started: ``started`` is its WORKING statusUpdate.
    ``reason``: a refusal's public reason, ``Admission.open``'s (which hands it on).

    PERF: a plain class, not a frozen dataclass (whose fields are set by
    ``object.__setattr__``), and one a message, admission's too: about 8 K instructions."""

    __slots__ = ("found", "refused", "started", "reason")

    def __init__(self, found: str | None = None, refused: str | None = None,
                 started: str | None = None, reason: str | None = None):
        self.found = found
        self.refused = refused
        self.started = started
        self.reason = reason


@dataclass(frozen=True, slots=True)
class Page:
    tasks: list                 # HubTask, newest first
    next_token: str             # "" on the last page
    total: int                  # every task matching the filters


def _fitting(sizes, max_bytes: int, least: int = 0) -> int:
    """How many of ``sizes``, from the first, fit ``max_bytes`` together: the first one past
    it ends them; the first ``least`` are taken whatever their size."""
    total = count = 0
    for size in sizes:
        total += size
        if count >= least and total > max_bytes:
            break
        count += 1
    return count


def newest_within(items: list, sizes: list, max_bytes: int) -> list:
    """The newest of ``items`` (oldest first, ``sizes`` theirs) whose sizes together are at
    most ``max_bytes``, oldest first: the first one past it ends them."""
    return items[len(items) - _fitting(reversed(sizes), max_bytes):]


def first_within(sizes: list, max_bytes: int) -> int:
    """How many of ``sizes`` (a ListTasks page's, newest first) fit ``max_bytes`` together:
    the first one past it ends them, but the first of all is always taken (a page holds at
    least one task, however large)."""
    return _fitting(sizes, max_bytes, least=1)


class TaskStore(abc.ABC):
    """Tasks, their events, claims and cancel marks; ``memory.MemoryTaskStore`` is the reference.

    Every method may raise ``StoreError`` when a shared store cannot answer.
    """

    shared = False               # other processes (replicas) use the same store

    # --- idempotency -------------------------------------------------------

    @abc.abstractmethod
    def claim_message(self, tenant: str, agent: str, message_id: str) -> str | None:
        """Claim ``message_id``: None when claimed now, else PENDING or the task id it made."""

    @abc.abstractmethod
    def release_message(self, tenant: str, agent: str, message_id: str) -> None:
        """Forget a claim that made no task (a refused admission, a failed start)."""

    # --- tasks -----------------------------------------------------------

    def open(self, task, event: str, counters, concurrency: int, rate: int,
             claimed: bool = False) -> Opened:
        """Accept a new message in one step where the store can: claim its messageId
        (``claimed``: the caller holds its PENDING claim already), take its tenant's
        admission slot and token from ``counters``, store ``task`` with its first event
        and start it (SUBMITTED → WORKING). Nothing is left behind when it refuses or
        raises: the claim is released, the slot given back."""
        if not claimed:
            found = self.claim_message(task.tenant, task.agent, task.message_id)
            if found is not None:
                return Opened(found=found)
        taken = False
        try:
            refused = counters.take(task.tenant, task.id, concurrency, rate)
            if refused is not None:
                self.release_message(task.tenant, task.agent, task.message_id)
                return Opened(refused=refused)
            taken = True
            self.create(task, event)
            return Opened(started=self.start(task.id))
        except BaseException:
            try:
                self.release_message(task.tenant, task.agent, task.message_id)
                if taken:
                    counters.give(task.tenant, task.id)
            except StoreError:
                pass            # the claim and the slot expire by themselves (a shared store)
            raise

    @abc.abstractmethod
    def create(self, task, event: str, bind: bool = True) -> None:
        """Store a new task and its first event, ``{"task": …}``.

        ``bind``: the task's message id now names it; otherwise (a refused
        admission) the claim is released in the same step.
        """

    @abc.abstractmethod
    def get(self, tenant: str, agent: str, task_id: str):
        """The task of this tenant's agent, or None (another tenant's or agent's is None too)."""

    def owns(self, tenant: str, agent: str, task_id: str) -> bool:
        """Whether the task is kept and is this tenant's agent's, as ``get`` finds it, without
        reading it (the push methods ask it of a task of any size)."""
        return self.get(tenant, agent, task_id) is not None

    def task_json(self, tenant: str, agent: str, task_id: str) -> str | None:
        """The whole task's JSON (GetTask without historyLength), or None as ``get``."""
        task = self.get(tenant, agent, task_id)
        return None if task is None else self.render(task, as_read=True)

    def kept(self, task_id: str, text: str) -> bool:
        """Whether ``text`` (``task_json``'s) is a form this store keeps, shared by every
        reader, not a copy of the caller's own (hub/held.py counts copies)."""
        return False

    @abc.abstractmethod
    def start(self, task_id: str) -> str | None:
        """SUBMITTED → WORKING; return the statusUpdate written, None if no longer SUBMITTED."""

    @abc.abstractmethod
    def append(self, task_id: str, event: str, n: int = 0) -> bool:
        """Append a non-final event (an artifactUpdate); False once the task has ended.

        ``n``: the event's number in its run (1, 2, …; 0: none): an event whose number is
        not past the last one written for the task was written already (its answer
        lost) and is not written again.
        """

    @abc.abstractmethod
    def end(self, task_id: str, state: str, text: str | None, artifacts: list | None,
            events: list, numbered: tuple[int, int] = (0, 0),
            answer: str | None = None, keep: bool = False) -> list | None:
        """End a live task: its final state, status text, artifacts, events, final status.

        Atomic compare-and-set: None (and nothing written) when the task has
        already ended, so a task has exactly one final state. Otherwise the
        payloads written: ``events`` then the final statusUpdate. ``numbered``:
        ``(first, count)``, the first ``count`` events are the run's numbered
        ones from ``first`` (``append``'s ``n``): those written already are not
        written again (with ``count`` 0, ``first`` is the number the run's next event
        would have had: every one before it was written).

        An event is its JSON text, or a tuple of the texts it joins to (an SSE
        body writes either). ``answer``: the JSON of the last of ``artifacts``, as
        the run encoded it once; an event ``(head, answer, tail)`` carries that
        same text (``is``), so a store need not encode or send it twice.
        ``keep``: the caller answers with the finished task: a store that builds its
        JSON returns it too (``Written.wire``), sparing a read.
        """

    @abc.abstractmethod
    def render(self, task, history_length: int | None = None, artifacts: bool = True,
               cache: bool = True, as_read: bool = False) -> str:
        """The task's JSON as it stands (consistent with concurrent changes).

        ``cache=False``: for a one-off answer; the store keeps no copy of the text.
        ``as_read``: ``task`` was just read from this store for this answer (``get``,
        ``list``): render that reading (a shared store reads it again otherwise).
        """

    @abc.abstractmethod
    def list(self, tenant: str, agent: str, *, context_id: str | None = None,
             state: str | None = None, after_ms: int | None = None, page_size: int = 50,
             token: str | None = None, max_bytes: int | None = None) -> Page:
        """One page of the tasks of ``tenant``'s ``agent``, newest first.

        ``max_bytes``: the page ends before the first task past it (their stored forms, in
        UTF-8 bytes, as ``context_tasks``; at least one task), its ``next_token`` naming the
        rest: the tasks past it are not read (None: ``page_size`` alone).

        Raises:
            ValueError: ``token`` is not one this store issued.
        """

    @abc.abstractmethod
    def context_tasks(self, tenant: str, agent: str, context_id: str, limit: int,
                      max_bytes: int) -> list:
        """The last ``limit`` tasks of a context, oldest first (the conversation's turns),
        as many of the newest as hold at most ``max_bytes`` together (their stored forms, in
        UTF-8 bytes): the first one past it, and those before it, are not read."""

    # --- events ----------------------------------------------------------

    @abc.abstractmethod
    def events(self, task_id: str, after: int, timeout: float,
               tenant: str | None = None, finished: bool = False) -> tuple[list, bool]:
        """Events after position ``after`` (waiting up to ``timeout`` for one).

        Returns ``(events, available)``: ``available`` is False when the task's
        log has expired (or the store closed), and the caller should end. ``finished``:
        the caller read the task finished, its log whole: a shared store reads it without
        writing (no mark that the task's next events be announced).
        """

    def kept_event(self, task_id: str, seq: int, payload: str) -> bool:
        """Whether ``payload`` (the event at position ``seq`` that ``events`` read) is a text
        this store keeps, shared by every reader, not a copy of the reader's own
        (hub/held.py counts copies)."""
        return False

    @abc.abstractmethod
    def last_position(self, task_id: str, tenant: str | None = None) -> int:
        """The position of the newest event of the task's log (0: none, or expired): a
        reader that waits only for what comes reads from just before it, not the whole log."""

    @abc.abstractmethod
    def has_events(self, task_id: str, tenant: str | None = None) -> bool:
        """False once the task's log has expired (the task itself stays)."""

    def keep_watching(self) -> None:
        """Keep announcing the events of the tasks this process's streams read (a shared
        store: the replica's turn calls it); nothing to do in one process."""

    def settle_runs(self) -> None:
        """Look at the runs that ended since the last turn before they leave this replica's
        runs (a shared store: the replica's turn calls it); nothing to do in one process."""

    def final_event(self, task_id: str, tenant: str | None = None) -> str | None:
        """The task's final event (whoever wrote it), or None while it runs or once expired."""
        events, _ = self.events(task_id, 0, 0, tenant=tenant)
        return next((event.payload for event in reversed(events) if event.terminal), None)

    # --- cancel marks ----------------------------------------------------

    @abc.abstractmethod
    def mark_cancel(self, task_id: str, tenant: str | None = None) -> None:
        """Ask whichever replica runs the task to cancel it."""

    @abc.abstractmethod
    def cancel_marked(self, task_id: str, tenant: str | None = None) -> bool:
        """True once the task was marked for cancelling."""

    # --- retention -------------------------------------------------------

    @abc.abstractmethod
    def expire_finished(self) -> None:
        """Forget the finished tasks past their tenant's ``tasks.retention_secs`` (every key
        of each: record, indexes, claim, events, cancel mark, push configs). Writes do it
        for their tenant, and the cap ``tasks.max_per_tenant`` as well; this is for the
        tenants that stopped writing."""

    # --- lifetime --------------------------------------------------------

    @abc.abstractmethod
    def close(self) -> None:
        """Wake every waiter; later waits return at once."""
