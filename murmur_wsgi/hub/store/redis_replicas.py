"""The replicas on Redis: liveness keys, the cancel channel, the stale sweep.

Each replica renews ``replica:<id>`` (``PX`` its liveness) and keeps the tasks it
runs in ``runs:<id>`` (members ``<tenant>/<task id>``, scored by creation; the
hub's slot, as ``replicas``, which lists every replica that may have runs). A run
enters its replica's runs no later than its task exists (on one Redis in the script that
creates it, on a cluster before it) and leaves them after its end (the task store's
``settle_runs`` at a turn, then ``flush_runs`` at a beat: ``redis_runs``), so every task
that runs is listed while it runs. The sweep ends FAILED, with the artifacts its log
holds, through the task store's END script (on the tenant's slot, the tenant read from the member), the runs of
replicas whose liveness key expired and runs older than ``sweep_max_age_secs``;
a member whose task had ended, or never came to be, is dropped; one whose tenant's
primary fails (a cluster serving without it) is left for a later sweep, and so are the
runs of a replica that cannot be read (its key of the wrong type). Each task it ends
is published on the cancel channel, where the connection's one listener
(``listen_cancels``) hears every replica's marks.
"""
from __future__ import annotations

from murmur_wsgi.hub.store.base import StoreError
from murmur_wsgi.hub.store.redis_client import FAILURES, each_task, failed, guarded
from murmur_wsgi.hub.store.redis_keys import (CHANNEL, REPLICAS, live_key, mark_key, runs_key,
                                              split_member, task_key)
from murmur_wsgi.hub.store.redis_sentinels import follow_primary
from murmur_wsgi.hub.store.replicas import ReplicaStore
from murmur_wsgi.hub.task import FAILED, TERMINAL, artifacts_of
from murmur_wsgi.wire.task import now_ms

# KEYS: the replica's liveness, its runs, replicas   ARGV: the replica
# A replica leaves ``replicas`` only while it is dead and lists no run: a replica that
# comes back lists its next run (ZADD, then SADD) no later than that run's task exists.
FORGET_REPLICA = """
if redis.call('EXISTS', KEYS[1]) == 0 and redis.call('ZCARD', KEYS[2]) == 0 then
  redis.call('SREM', KEYS[3], ARGV[1])
end
return 1
"""


class RedisReplicas(ReplicaStore):
    """This replica's liveness and its view of the others, on ``conn`` beside ``tasks``."""

    def __init__(self, conn, tasks):
        self.conn = conn
        self._redis = conn.redis
        self._tasks = tasks
        self._forget_replica = self._redis.register_script(FORGET_REPLICA)

    @guarded
    def cancel_marks(self, runs):
        hits = each_task(self._redis, runs, lambda pipe, run: pipe.exists(mark_key(*run)))
        return {task_id for (_, task_id), hit in zip(runs, hits) if hit}

    @guarded
    def ended_of(self, runs):
        states = each_task(self._redis, runs,
                           lambda pipe, run: pipe.hget(task_key(*run), "state"))
        ended = {(tenant, task_id) for (tenant, task_id), state in zip(runs, states)
                 if state in TERMINAL}
        for tenant, task_id in ended:
            self._tasks.ended_elsewhere(tenant, task_id)    # leaves this replica's runs
        return {task_id for _, task_id in ended}

    def listen_cancels(self, callback, lost=None):
        """The cancel channel's messages to ``callback``, on the connection's one listener
        (``redis_feed``: the thread that feeds every stream); it reconnects while open, and
        calls ``lost()`` once it is subscribed again."""
        self.conn.on_cancel = callback
        self.conn.on_cancels_lost = lost
        self.conn.start_feed()

    @guarded
    def heartbeat(self):
        # NOTE: first, so that the beat goes to the primary the sentinels name now.
        follow_primary(self._redis)
        self._redis.set(live_key(self.conn.replica), str(now_ms()), px=self.conn.liveness_ms)
        self._tasks.flush_runs()            # the runs that ended, settled since the last beat
        self.conn.command.prune()           # what a burst left idle (redis_commands.Commands)

    @guarded
    def sweep(self, max_age_secs, text):
        replicas = sorted(self._redis.smembers(REPLICAS))
        if not replicas:
            return []
        pipe = self._redis.pipeline(transaction=False)
        for replica in replicas:
            pipe.exists(live_key(replica))
        alive = pipe.execute()
        oldest = now_ms() - int(max_age_secs * 1000)
        ended = []
        for replica, live in zip(replicas, alive):
            # NOTE: this replica's runs are in flight here, whatever its key says: a turn
            # whose steps before the sweep outlast the liveness (a loaded machine, a step
            # waiting on a cluster's stalled primary) read its own key expired, and ended
            # them FAILED. Only their age ends them.
            live = live or replica == self.conn.replica
            try:
                self._sweep_runs(replica, live, oldest, text, ended)
            except FAILURES as ex:
                # NOTE: one replica's runs that cannot be read (a key of the wrong type)
                # keep no other replica's from the sweep.
                failed("sweep", ex)
        return ended

    def _sweep_runs(self, replica: str, live: bool, oldest: int, text: str,
                    ended: list) -> None:
        """The sweep of one replica's runs: those older than ``oldest``, or every one of a
        replica whose liveness expired (then the replica too, once it has none); the ids
        of those it ended added to ``ended``."""
        runs = runs_key(replica)
        members = self._redis.zrangebyscore(runs, "-inf", oldest) if live else \
            self._redis.zrange(runs, 0, -1)
        for found in members:
            tenant, task_id = split_member(found)
            try:
                # NOTE: what the run's stream published stays on the task, as a run's
                # own FAILED keeps it (what its replica never wrote to the log is lost
                # with it).
                artifacts = artifacts_of(self._tasks.logged(task_id, tenant)) or None
                done = self._tasks.end(task_id, FAILED, text, artifacts, [],
                                       tenant=tenant)
            except StoreError:
                # NOTE: on a cluster, the tenant's primary may be lost while the others
                # serve: its runs wait for a later sweep, the other tenants' end now.
                continue
            if done is not None:
                ended.append(task_id)
                # NOTE: a replica taken for dead may still run it: told at once, it ends
                # its run and the sender's own stream with this end.
                self._redis.publish(CHANNEL, task_id)
            self._redis.zrem(runs, found)
        if not live:
            self._forget_replica(keys=[live_key(replica), runs, REPLICAS], args=[replica])
