"""A Redis Cluster's redirections, followed command by command: ``follow``.

While a slot moves to another primary (``redis-cli --cluster reshard`` or ``rebalance``
sends its keys over in batches, then gives the slot to the new owner):

- its old owner answers a command whose keys it holds as before; ASK, naming the node
  that imports the slot, one none of whose keys it holds now; and TRYAGAIN one that
  names several keys it holds in part (a script of a task whose record moved and whose
  events did not yet, or a new task's, whose keys are nowhere yet, beside the tenant's
  index);
- the importing node answers a command sent after ``ASKING``, but TRYAGAIN one of
  several keys it does not hold every one of yet;
- once the slot moved, MOVED names its new owner.

``follow`` sends each command of a call again where its own answer says, and only that
command: the call's others, answered, are not sent again (a write done twice, or a read
answered by the importing node, which does not hold its key yet). A TRYAGAIN is sent again
every ``PAUSE_SECS`` (the keys move meanwhile) until the call's deadline (the store's
``timeout_secs`` from its start); past it, or past ``REDIRECTS`` rounds of MOVED and ASK,
the last answer is raised: a slot whose keys take longer to move answers -32603, as
Redis being away does (docs/hub.md, "Resharding").
"""
from __future__ import annotations

import time

import redis
from redis.exceptions import AskError, MovedError, TryAgainError

# The answers that send a command elsewhere (it was not done there).
REDIRECTED = (AskError, TryAgainError)          # (a MovedError is an AskError)
PAUSE_SECS = 0.05       # between two sends of a command Redis answered TRYAGAIN
REDIRECTS = 16          # the most rounds of MOVED and ASK in a row one call follows


def follow(commands, route, send, *, asked_node, moved, pause, deadline: float,
           asking: bool = True, clock=time.monotonic) -> list:
    """Each command's answer (a ``ResponseError`` in its place, not raised), each sent
    where the cluster's answers to it say.

    Args:
        commands: the call's commands (tuples).
        route: ``route(command) -> node``, the owner of the command's slot by the map.
        send: ``send(node, commands, asked) -> answers``, one round trip to ``node`` (each
            command after an ``ASKING`` when ``asked``), errors in place.
        asked_node: ``asked_node(host, port, origin) -> node``, the node an ASK names.
        moved: called once a round met MOVED, before the next (the map read anew).
        pause: ``pause(seconds)``, true when the store closed meanwhile (then no more sends).
        deadline: the ``clock()`` past which a TRYAGAIN is not sent again.
        asking: False: an ASK is an answer (retention's reads, which must not reach a node
            that does not hold their keys yet).
    """
    answers: list = [None] * len(commands)
    todo: dict = {i: None for i in range(len(commands))}     # index -> the node asked, or None
    rounds = 0
    while True:
        groups: dict = {}
        for i, target in todo.items():
            node = target if target is not None else route(commands[i])
            groups.setdefault((node.name, target is not None), (node, []))[1].append(i)
        todo, last, moves, busy = {}, None, False, False
        for (_, asked), (node, indices) in groups.items():
            found = send(node, [commands[i] for i in indices], asked)
            for i, answer in zip(indices, found):
                if isinstance(answer, MovedError):         # (a MovedError is an AskError)
                    todo[i], moves = None, True
                elif isinstance(answer, AskError) and asking:
                    todo[i] = asked_node(answer.host, answer.port, node)
                elif isinstance(answer, TryAgainError):
                    todo[i], busy = None, True          # to the slot's owner again
                else:
                    answers[i] = answer
                    continue
                last = answer
        if not todo:
            return answers
        # NOTE: an ASK to the importing node answered TRYAGAIN there (a new task's keys, which
        # exist on neither node until the slot has moved) goes back to the old owner, which
        # answers ASK again: the deadline bounds those rounds, REDIRECTS the others.
        rounds = 0 if busy else rounds + 1
        if rounds > REDIRECTS:
            raise last
        if moves:
            moved()
        if busy and (clock() >= deadline or pause(PAUSE_SECS)):
            raise last


def raised(answers: list) -> list:
    """``answers``, once none is an error: the first one is raised (as a pipeline does)."""
    for answer in answers:
        if isinstance(answer, (redis.ResponseError, redis.ConnectionError)):
            raise answer
    return answers
