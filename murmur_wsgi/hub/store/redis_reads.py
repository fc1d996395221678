"""The Redis task store's reads of task records (``RecordReads``, a part of
``redis.RedisTaskStore``): one task's record, a page's, a context's.

A record is read by one script (``RECORD``, ``redis_read_scripts.record_script``) that
answers as ``HMGET`` of ``RECORD_FIELDS`` does, unless its stored forms (``STORED_FORMS``:
a finished task's wire form, a running one's history and artifacts) pass ``LARGE_CHARS``:
then with their size alone, and the record is read once the worker has room for it
(``large_reads``). A ListTasks page or a context's tasks read their sizes first
(``HSTRLEN``), and no record past the bound in bytes they are read within.
"""
from __future__ import annotations

import json
import logging

from redis.exceptions import NoPermissionError, NoScriptError, ResponseError

from murmur_wsgi.turns import turn, wait_turn
from murmur_wsgi.hub.held import LARGE_CHARS
from murmur_wsgi.hub.store.base import newest_within
from murmur_wsgi.hub.store.redis_client import FAILURES, each_task, failed
from murmur_wsgi.hub.store.redis_client import guarded as _guarded
from murmur_wsgi.hub.store.redis_keys import index_key, task_key
from murmur_wsgi.hub.store.redis_commands import script_sha
from murmur_wsgi.hub.store.redis_read_scripts import record_script
from murmur_wsgi.hub.task import TERMINAL, HubTask
from murmur_wsgi.wire.message_hub import stored_head
from murmur_wsgi.logs import Sparse

MAX_ID_BYTES = 256               # a task id longer than this names no task
# What a read of one record asks for (one HMGET, its owner first): a finished task's
# wire form, else what rebuilds it (``_record``).
RECORD_FIELDS = ("tenant", "agent", "wire", "id", "ctx", "msg", "state", "text", "ms",
                 "created", "seq", "hist", "arts")
WIRE = RECORD_FIELDS.index("wire")
STORED_FORMS = ("wire", "hist", "arts")   # what a record's size is made of
RECORD = record_script(RECORD_FIELDS, STORED_FORMS)
RECORD_SHA = script_sha(RECORD)
# The commands that run it (and a stream's page of a log: ``redis_events``): read-only,
# which a write pause (``CLIENT PAUSE … WRITE``, as ``FAILOVER`` and ``CLUSTER FAILOVER``
# pause a primary) lets through, where it holds a script's ``EVALSHA``; Redis before 7.0
# knows only the latter, and an ACL user may be allowed only the latter.
READ_ONLY = ("EVALSHA_RO", "EVAL_RO")
SCRIPTED = ("EVALSHA", "EVAL")

logger = logging.getLogger(__name__)
_UNREADABLE = Sparse(secs=3600, keys=1000)       # a record that cannot be read: hourly


def _refused(ex: ResponseError) -> bool:
    """Whether ``ex`` is Redis refusing a command it does not know, or that the user may
    not send (not an error of the script's)."""
    return isinstance(ex, NoPermissionError) or str(ex).lower().startswith("unknown command")


def _unreadable(tenant: str, task_id: str) -> None:
    """Log a task record that cannot be read, at most once an hour per record."""
    if _UNREADABLE.due((tenant, task_id)) is not None:
        logger.error("redis store: the record of task %s (tenant %s) cannot be read: left "
                     "out of its pages", task_id, tenant)


_ARTIFACTS = ',"artifacts":['


def _shape(wire: str, fields: dict) -> tuple | None:
    """A finished record's ``HubTask._shape`` (where its artifacts and its history begin,
    in characters, and how many messages its history holds), found in its wire form, or
    None when it is not there (a form written by hand): the form is parsed then.

    The history is last, and begins with its one message's ids, the task's own among them
    (``wire/message_hub.stored_head``): no text before it can hold that, since the task's
    id was made after its message was sent, and its message cannot hold it either: the last
    ``,"history":[`` followed by them is the place. The artifacts follow the status, which
    the hub writes (a client's strings in it are escaped: no ``"`` of theirs is bare): the
    first ``,"artifacts":[`` is theirs, if it comes before the history.

    PERF: a GetTask with ``historyLength`` and a ListTasks page answer such a task from its
    form, cut where asked, not parsed then encoded again: a record of a message of 200,000
    numbers was about 0.2 s of the worker's loop for each read, in two C calls; two searches
    of the text instead. NOTE: a hub task's history is the one message that made it: one."""
    h0 = wire.rfind(',"history":[' + stored_head(fields["msg"], fields["ctx"], fields["id"]))
    if h0 < 0 or wire[-1:] != "}":
        return None
    a0 = wire.find(_ARTIFACTS, 0, h0)
    return (a0 if a0 > 0 else h0), h0, 1


def _running(head: str, hist: str, arts: str) -> tuple[str, tuple]:
    """A running task's wire form and ``_shape``, from its head (``HubTask.head_json``) and
    its record's ``hist`` and ``arts`` (JSON arrays, ``compact_utf8``'s: the pieces
    ``HubTask._pieces`` would encode again), as ``HubTask.freeze`` makes them."""
    if type(hist) is not str or type(arts) is not str:
        raise TypeError("a running task's record without its history or artifacts")
    arts = f',"artifacts":{arts}' if arts != "[]" else ""
    hist = f',"history":{hist}' if hist != "[]" else ""
    return "".join((head, arts, hist, "}")), (len(head), len(head) + len(arts),
                                               1 if hist else 0)


class RecordReads:
    """Reads of task records; the store's ``_command`` (its hot paths' client), ``_redis``,
    ``_index`` and ``large_reads`` (see ``redis.RedisTaskStore``)."""

    _read_by = READ_ONLY            # SCRIPTED once Redis refused EVALSHA_RO

    @staticmethod
    def _record(fields: dict | None) -> HubTask | None:
        if not fields or fields.get("id") is None:
            return None
        task = HubTask(fields["id"], fields["ctx"], fields["tenant"], fields["agent"],
                       fields["msg"], None)
        task.state = fields["state"]
        task.status_text = json.loads(fields["text"])
        task.status_ms = int(fields["ms"])
        task.created_ms = int(fields["created"])
        task.seq = int(fields["seq"])
        wire = fields.get("wire")
        if wire is None and task.state not in TERMINAL:
            # A task still running: its form joined from the JSON texts its record keeps
            # (PERF: not parsed and encoded again, as a finished one's: ``_shape``).
            wire, shape = _running(task.head_json(), fields["hist"], fields["arts"])
        elif wire is None:                # ended by a hub before ``wire``: rendered anew
            task.history = json.loads(fields["hist"])
            task.artifacts = json.loads(fields["arts"])
            return task
        else:                             # a finished one: its wire form holds them
            shape = _shape(wire, fields)
            if shape is None:             # (a form written by hand)
                whole = json.loads(wire)
                task.history = whole.get("history", [])
                task.artifacts = whole.get("artifacts", [])
                task._json = wire
                return task
        # frozen: read, or cut, from its form as asked
        task._json, task._shape = wire, shape
        task._history = task._artifacts = None
        return task

    def _load(self, tenant: str, task_ids: list) -> list:
        """The records of ``task_ids`` that exist; one that cannot be read (a field missing,
        garbage JSON: written by hand, a bad restore) is left out and logged, not a failure
        of the whole page (a ListTasks page, a context's tasks) for every task of it."""
        ends = wait_turn()
        records = each_task(self._redis, task_ids,
                            lambda pipe, t: pipe.hgetall(task_key(tenant, t)))
        tasks = []
        for task_id, fields in zip(task_ids, records):
            ends = turn(ends)         # a page of 16 MiB is about 0.05 s of parsing
            try:
                task = self._record(fields)
            except (ValueError, KeyError, TypeError, AttributeError):
                _unreadable(tenant, task_id)
                continue
            if task is not None:
                tasks.append(task)
        return tasks

    def _values(self, tenant: str, task_id: str, agent: str | None = None) -> list | None:
        """The record's ``RECORD_FIELDS`` (one ``RECORD`` script, as ``HMGET`` answers; a large
        one read again once the worker has room: ``large_reads``), None unless it is
        ``agent``'s (when named) and exists (a task of another tenant is not in its keys)."""
        if len(task_id) > MAX_ID_BYTES:
            return None
        key = task_key(tenant, task_id)
        values = self._read_only(RECORD_SHA, RECORD, 1, key, LARGE_CHARS)
        if type(values) is int:               # its stored forms' size: large
            with self.large_reads.room(values, tenant):
                values = self._command("HMGET", key, *RECORD_FIELDS)
        if values[0] is None or values[0] != tenant or (agent is not None
                                                         and values[1] != agent):
            return None
        return values

    def _read_only(self, sha: str, source: str, *keys_and_args):
        """The answer of a script that only reads (``source``, its SHA1 ``sha``), sent as
        ``_read_by`` says: ``EVALSHA_RO``, ``EVAL_RO`` once Redis forgot it; ``EVALSHA`` from
        the first time a Redis refused ``EVALSHA_RO`` (``READ_ONLY``)."""
        evalsha, evaluate = self._read_by
        try:
            return self._command(evalsha, sha, *keys_and_args)
        except NoScriptError:
            pass
        except ResponseError as ex:
            if evalsha == "EVALSHA" or not _refused(ex):
                raise
            self._read_by = SCRIPTED            # a Redis before 7.0, or an ACL without it
            return self._read_only(sha, source, *keys_and_args)
        try:
            return self._command(evaluate, source, *keys_and_args)
        except ResponseError as ex:
            if evaluate == "EVAL" or not _refused(ex):
                raise
            # NOTE: an ACL allowing EVALSHA_RO, not EVAL_RO: loaded by EVAL, the script is
            # read by EVALSHA_RO again from the next read on.
            return self._command("EVAL", source, *keys_and_args)

    def _fields(self, tenant: str, task_id: str, agent: str | None = None) -> dict | None:
        """``_values`` by name."""
        values = self._values(tenant, task_id, agent)
        return None if values is None else dict(zip(RECORD_FIELDS, values))

    def get(self, tenant, agent, task_id):
        try:            # NOTE: not ``guarded``: a SubscribeToTask's opening read
            return self._record(self._fields(tenant, task_id, agent))
        except FAILURES as ex:
            raise failed("get", ex) from None

    @_guarded
    def owns(self, tenant, agent, task_id):
        # PERF: three fields of the record, not the record: a push method on a task of a
        # 59 MB answer read it all from Redis and parsed it (0.16 s of the worker's CPU).
        if len(task_id) > MAX_ID_BYTES:
            return False
        found = self._command("HMGET", task_key(tenant, task_id), "tenant", "agent", "id")
        return found[0] == tenant and found[1] == agent and found[2] is not None

    @_guarded
    def task_json(self, tenant, agent, task_id):
        values = self._values(tenant, task_id, agent)
        if values is None:
            return None
        if values[WIRE] is not None:                  # finished: its wire form, as it is
            return values[WIRE]
        task = self._record(dict(zip(RECORD_FIELDS, values)))
        return None if task is None else task.to_json(cache=False)

    @_guarded
    def render(self, task, history_length=None, artifacts=True, cache=True, as_read=False):
        # NOTE: the record as it stands now (another replica may have changed it): a fresh
        # copy each time, so nothing is kept whatever ``cache`` says.
        current = task if as_read else self._record(self._fields(task.tenant, task.id)) or task
        return current.to_json(history_length, artifacts, cache=False)

    @_guarded
    def list(self, tenant, agent, *, context_id=None, state=None, after_ms=None, page_size=50,
             token=None, max_bytes=None):
        return self._index.list(tenant, agent, context_id=context_id, state=state,
                                after_ms=after_ms, page_size=page_size, token=token,
                                max_bytes=max_bytes)

    @_guarded
    def context_tasks(self, tenant, agent, context_id, limit, max_bytes):
        ids = self._redis.zrange(index_key(tenant, agent, context_id), -limit, -1)
        return self._load(tenant, newest_within(ids, self._sizes(tenant, ids), max_bytes))

    def _sizes(self, tenant: str, ids: list) -> list[int]:
        """The stored forms' sizes of the tasks ``ids`` (HSTRLEN: no record is sent), so that
        only the records that fit are read."""
        sizes = each_task(self._redis, ids, lambda pipe, t: [
            pipe.hstrlen(task_key(tenant, t), field) for field in STORED_FORMS])
        return [sum(sizes[i * len(STORED_FORMS):(i + 1) * len(STORED_FORMS)])
                for i in range(len(ids))]
