"""Agents: the contract (base), the demo agent, Python callables and harness processes.

The public agent API is importable from here: ``TaskContext`` and the port it
calls (``AgentPort``), the endings (``Completed``, ``TaskRejected``,
``TaskFailed``, ``TaskCanceled``, ``AgentValueError``), the typed message and
parts (``Message``, ``Reply``, ``TextPart``, ``DataPart``, ``FilePart``,
``UrlPart``), the artifact writers, the run's usage (``RunUsage``) and
``strip_untrusted_fence``.
"""
from __future__ import annotations

import logging

from murmur_wsgi.agents.artifacts import RESERVED as RESERVED_ARTIFACTS
from murmur_wsgi.agents.artifacts import Artifacts, ArtifactStream
from murmur_wsgi.agents.base import TaskContext
from murmur_wsgi.agents.endings import (NOT_JSON, AgentValueError, Completed, TaskCanceled,
                                        TaskFailed, TaskRejected)
from murmur_wsgi.agents.fence import strip_untrusted_fence
from murmur_wsgi.agents.parts import (DataPart, FilePart, Message, Part, Reply, TextPart,
                                      UrlPart, as_part)
from murmur_wsgi.agents.port import AgentPort
from murmur_wsgi.agents.usage import RunUsage, TokenCounts
from murmur_wsgi.loading import import_callable

logger = logging.getLogger(__name__)

__all__ = ["AgentLoadError", "AgentPort", "AgentValueError", "ArtifactStream", "Artifacts",
           "Completed", "DataPart", "FilePart", "Message", "NOT_JSON", "Part",
           "RESERVED_ARTIFACTS", "Reply", "RunUsage", "TaskCanceled", "TaskContext",
           "TaskFailed", "TaskRejected", "TextPart", "TokenCounts", "UrlPart",
           "agent_from_spec", "as_part", "resolve_agent", "strip_untrusted_fence"]


class AgentLoadError(Exception):
    """The manifest's agent cannot be loaded; ``str()`` is one line."""


def resolve_agent(manifest, agent=None):
    """Return the callable serving tasks: ``agent`` if given, else the manifest's."""
    if agent is not None:
        if not callable(agent):
            raise AgentLoadError("agent: must be callable")
        return agent
    return agent_from_spec(manifest.agent)


def agent_from_spec(spec):
    """The callable an ``agent:`` value names: ``demo``, a harness block, ``module:name``.

    Raises:
        AgentLoadError: it cannot be loaded (one line, starting ``agent:``).
    """
    if spec == "demo":
        from murmur_wsgi.agents.demo import demo_agent
        return demo_agent
    if isinstance(spec, dict):
        from murmur_wsgi.agents.harness import HarnessAgent
        return HarnessAgent(spec)
    return import_callable(spec, "agent", AgentLoadError)
