"""A2A v1.0's JSON-RPC method names that both applications must recognise.

A server that does not serve push notifications still tells these methods
from an unknown one: the door answers them -32003, the hub (push off) -32004.
"""
from __future__ import annotations

PUSH_METHODS = frozenset({"CreateTaskPushNotificationConfig", "GetTaskPushNotificationConfig",
                          "ListTaskPushNotificationConfigs", "DeleteTaskPushNotificationConfig"})
