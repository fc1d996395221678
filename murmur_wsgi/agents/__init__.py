"""Agents: the contract (base), the demo agent, Python callables and harness processes.

The public agent API is importable from here: ``TaskContext``, the endings
(``Completed``, ``TaskRejected``, ``TaskFailed``, ``TaskCanceled``), the typed
message and parts (``Message``, ``TextPart``, ``DataPart``, ``FilePart``,
``UrlPart``), the artifact writers, the run's usage (``RunUsage``) and
``strip_untrusted_fence``.
"""
from __future__ import annotations

import logging

from murmur_wsgi.agents.artifacts import RESERVED as RESERVED_ARTIFACTS
from murmur_wsgi.agents.artifacts import Artifacts, ArtifactStream
from murmur_wsgi.agents.base import (Completed, TaskCanceled, TaskContext, TaskFailed,
                                     TaskRejected)
from murmur_wsgi.agents.fence import strip_untrusted_fence
from murmur_wsgi.agents.parts import (DataPart, FilePart, Message, Part, TextPart, UrlPart,
                                      as_part)
from murmur_wsgi.agents.usage import RunUsage, TokenCounts
from murmur_wsgi.loading import import_callable

logger = logging.getLogger(__name__)

__all__ = ["AgentLoadError", "ArtifactStream", "Artifacts", "Completed", "DataPart",
           "FilePart", "Message", "Part", "RESERVED_ARTIFACTS", "RunUsage", "TaskCanceled",
           "TaskContext", "TaskFailed", "TaskRejected", "TextPart", "TokenCounts", "UrlPart",
           "as_part", "resolve_agent", "strip_untrusted_fence"]


class AgentLoadError(Exception):
    """The manifest's agent cannot be loaded; ``str()`` is one line."""


def resolve_agent(manifest, agent=None):
    """Return the callable serving tasks: ``agent`` if given, else the manifest's."""
    if agent is not None:
        if not callable(agent):
            raise AgentLoadError("agent: must be callable")
        return agent
    spec = manifest.agent
    if spec == "demo":
        from murmur_wsgi.agents.demo import demo_agent
        return demo_agent
    if isinstance(spec, dict):
        from murmur_wsgi.agents.harness import HarnessAgent
        return HarnessAgent(spec)
    return import_callable(spec, "agent", AgentLoadError)
