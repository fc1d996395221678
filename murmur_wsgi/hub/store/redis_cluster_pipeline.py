"""A pipeline on a Redis Cluster whose commands may be in several slots (``NodePipeline``), and
the key a command is routed by (``key_of``); ``redis_cluster``'s client makes the one and
``ClusterCommands`` routes by the other.
"""
from __future__ import annotations

import time

import redis
from redis.cluster import RedisCluster

from murmur_wsgi.hub.store.redis_redirects import follow, raised


def key_of(command: tuple) -> str | None:
    """The first key a command names (a script's first of ``KEYS``), None when it has none."""
    name = str(command[0]).upper()
    if name in ("EVAL", "EVALSHA", "EVAL_RO", "EVALSHA_RO"):
        return command[3] if int(command[2]) > 0 else None
    return command[1] if len(command) > 1 else None


class NodePipeline(redis.client.Pipeline):
    """A pipeline (no transaction) whose commands may be in several slots: each node's
    commands (by the slot of each command's first key) go to it in one pipeline of its
    own, node after node, each sent once, so a timed-out one is not sent again
    (redis-py's cluster pipeline sends each command of a failed one again, one by one,
    each with its own timeout). The answers come back in the order queued. A command
    answered MOVED, ASK or TRYAGAIN is sent again where that says, and only it
    (``redis_redirects.follow``; MOVED reads the slot map anew). A node whose connection
    fails (a lost primary) raises once the other nodes' commands are sent; one that
    times out raises at once. A script queued (``Script(keys, args, client=pipe)``) is
    loaded on each node first.

    It queues as a node's pipeline does and is never sent itself: ``execute`` sends."""

    def __init__(self, cluster: RedisCluster):
        node = cluster.get_default_node().redis_connection
        super().__init__(node.connection_pool, node.response_callbacks, transaction=False,
                         shard_hint=None)
        self._cluster = cluster

    def _route(self, command):
        key = key_of(command[0])
        return self._cluster.get_default_node() if key is None else \
            self._cluster.get_node_from_key(key)

    @staticmethod
    def _send(node, commands, scripts, asked: bool) -> list:
        pipe = node.redis_connection.pipeline(transaction=False)
        pipe.scripts = set(scripts)
        for args, options in commands:
            if asked:
                pipe.execute_command("ASKING")
            pipe.execute_command(*args, **options)
        found = pipe.execute(raise_on_error=False)
        return found[1::2] if asked else found

    def execute(self, raise_on_error: bool = True) -> list:
        stack = list(self.command_stack)
        scripts = set(self.scripts)
        self.reset()

        def send(node, commands, asked):
            try:
                return self._send(node, commands, scripts, asked)
            except redis.ConnectionError as ex:
                # NOTE: a lost primary (its connection refused at once) does not keep the
                # other nodes' commands from being sent: a replica's turn renews every other
                # tenant's slots. A timed-out one still raises at once (a stalled node costs
                # its timeout once).
                return [ex] * len(commands)

        answers = follow(stack, self._route, send, asked_node=self._cluster.asked_node,
                         moved=self._cluster.nodes_manager.initialize,
                         pause=self._cluster.closing.wait,
                         deadline=time.monotonic() + self._cluster.timeout_secs)
        if not raise_on_error:
            return answers                  # a lost node's commands: its ConnectionError
        for answer in answers:
            if isinstance(answer, redis.ConnectionError):
                raise answer
        return raised(answers)
