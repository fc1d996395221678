"""A message's acceptance on Redis (``Accepting``, mixed into ``redis.RedisTaskStore``).

One step, the ``OPEN`` script (``redis_scripts``): the messageId's claim, the tenant's
admission (``redis_limits``), the task's creation and its start. On one Redis the script
also lists the run in its replica's runs (``runs:<replica>`` and ``replicas``, the hub's
slot), once the message is admitted: one round trip of one command, and a message sent
again or refused never enters the runs. On a cluster those keys are in another slot than
the tenant's, so the run is listed first, in a round trip of its own; a Redis named by a
``redis://`` URL that keeps a script to one slot (a cluster node, a proxy or service in
front of one) refuses the first listing script whole (CROSSSLOT), and from then on the
run is listed first, in the same round trip: said once in the log.

Concurrency: ``_runs_in_script`` goes from True to False once, a plain attribute (an
OPEN sent meanwhile the old way is refused and sent again, as the first).
"""
from __future__ import annotations

import logging

from redis.exceptions import ClusterCrossSlotError, ResponseError

from murmur_wsgi.hub.store.base import Opened
from murmur_wsgi.hub.store.counters import CONCURRENCY, RATE
from murmur_wsgi.hub.store.redis_client import guarded as _guarded
from murmur_wsgi.hub.store.redis_commands import short
from murmur_wsgi.hub.store.redis_keys import REPLICAS, member, rate_key, running_key, runs_key
from murmur_wsgi.hub.store.redis_limits import RedisCounters
from murmur_wsgi.hub.task import WORKING, started_event
from murmur_wsgi.wire.task import now_ms

logger = logging.getLogger(__name__)


class Accepting:
    """``open``: a new message accepted in one step (see the module)."""

    def _accepting_init(self, cluster: bool) -> None:
        self._runs_in_script = not cluster      # the OPEN script lists the run (``_open``)

    def open(self, task, event, counters, concurrency, rate, claimed=False):
        if not isinstance(counters, RedisCounters):
            return super().open(task, event, counters, concurrency, rate, claimed)
        # PERF: one round trip of one command on one Redis (the OPEN script: the run's
        # place in the replica's runs, claim, admission, creation and start); two on a
        # cluster, where the runs (the hub's slot) are sent first (``_open``).
        ms = now_ms()
        started = started_event(task.id, task.context_id, ms)
        call, unbounded = self._create_call(task, event, state=WORKING, ms=ms)
        keys = call["keys"] + [running_key(task.tenant), rate_key(task.tenant)]
        args = call["args"] + ["1" if claimed else "0", concurrency, rate, counters.lease_ms,
                               started, self._max_events]
        # PERF: the call's arguments of unbounded length measured, not each looked at
        fits = short(started, *unbounded)
        (code, value), listed = self._open(task, keys, args, fits)
        if code != 0 and listed:
            self._left.append(member(task.tenant, task.id))      # no run: out of the runs
        if code == 1:
            return Opened(found=value)
        if code == 2:
            return Opened(refused=(CONCURRENCY, RATE)[int(value) - 1])
        task.seq = int(value)
        self._names[task.id] = (task.tenant, task.agent, task.context_id)
        return Opened(started=started)

    @_guarded
    def _open(self, task, keys, args, fits: bool) -> tuple:
        """``(the OPEN script's answer, whether the run was listed before it)``: on one Redis
        the script lists the run, given the runs' keys (the hub's slot); a Redis that keeps
        a script to one slot (a cluster node, a proxy in front of one, named by a
        ``redis://`` URL) refuses that (CROSSSLOT, nothing done), and from then on the run
        is listed first, in the same round trip, as on a cluster."""
        if self._runs_in_script:
            try:
                return self._scripts["OPEN"](
                    keys=keys + [runs_key(self.replica), REPLICAS],
                    args=args + [member(task.tenant, task.id)], short=fits), False
            except ResponseError as ex:
                # NOTE: redis-py names the CROSSSLOT answer; a proxy may answer it as text.
                if not (isinstance(ex, ClusterCrossSlotError)
                        or str(ex).startswith("CROSSSLOT")):
                    raise
                self._runs_in_script = False
                logger.warning("redis store: this Redis keeps a script to the keys of one "
                               "slot: a run is listed in its replica's runs before its "
                               "script, in the same round trip")
        return self._scripts["OPEN"](keys=keys, args=args, before=self._running(task),
                                     short=fits), True
