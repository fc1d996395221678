"""The replicas on Redis: liveness keys, the cancel channel, the stale sweep.

Each replica renews ``replica:{id}`` (``PX`` its liveness) and keeps the
tasks it runs in ``runs:{id}`` (scored by creation); ``replicas`` lists every
replica that ran one. The sweep ends FAILED, through the task store's END
script, the runs of replicas whose liveness key expired and runs older than
``sweep_max_age_secs``, and publishes each on the cancel channel, where the
connection's one listener (``listen_cancels``) hears every replica's marks.
"""
from __future__ import annotations


from murmur_wsgi.hub.store.redis_client import each_task, guarded
from murmur_wsgi.hub.store.redis_keys import CHANNEL, REPLICAS, live_key, mark_key, runs_key, \
    task_key
from murmur_wsgi.hub.store.replicas import ReplicaStore
from murmur_wsgi.hub.task import FAILED, TERMINAL
from murmur_wsgi.wire.task import now_ms


class RedisReplicas(ReplicaStore):
    """This replica's liveness and its view of the others, on ``conn`` beside ``tasks``."""

    def __init__(self, conn, tasks):
        self.conn = conn
        self._redis = conn.redis
        self._tasks = tasks

    @guarded
    def cancel_marks(self, task_ids):
        hits = each_task(self._redis, task_ids, lambda pipe, t: pipe.exists(mark_key(t)))
        return {task_id for task_id, hit in zip(task_ids, hits) if hit}

    @guarded
    def ended_of(self, task_ids):
        states = each_task(self._redis, task_ids,
                           lambda pipe, t: pipe.hget(task_key(t), "state"))
        return {task_id for task_id, state in zip(task_ids, states) if state in TERMINAL}

    def listen_cancels(self, callback):
        """The cancel channel's messages to ``callback``, on the connection's one listener
        (``redis_feed``: the thread that feeds every stream); it reconnects while open."""
        self.conn.on_cancel = callback
        self.conn.start_feed()

    @guarded
    def heartbeat(self):
        self._redis.set(live_key(self.conn.replica), str(now_ms()), px=self.conn.liveness_ms)
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
            runs = runs_key(replica)
            ids = self._redis.zrangebyscore(runs, "-inf", oldest) if live else \
                self._redis.zrange(runs, 0, -1)
            for task_id in ids:
                if self._tasks.end(task_id, FAILED, text, None, []) is not None:
                    ended.append(task_id)
                    # NOTE: a replica taken for dead may still run it: told at once, it ends
                    # its run and the sender's own stream with this end.
                    self._redis.publish(CHANNEL, task_id)
                self._redis.zrem(runs, task_id)
            if not live and not self._redis.zcard(runs):
                self._redis.srem(REPLICAS, replica)
        return ended
