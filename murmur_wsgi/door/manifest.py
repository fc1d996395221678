"""The manifest, ``murmur.yaml``: its schema, defaults and loading.

A bad manifest stops the process with one line naming the key, exit 2
(``ManifestError`` carries that line; the CLI prints it).
"""
from __future__ import annotations

import logging
import os
import re
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from marshmallow import (EXCLUDE, Schema, ValidationError, fields, post_load, validate,
                         validates_schema)

from murmur_wsgi.agents.output import MAX_OUTPUT_BYTES, MIN_OUTPUT_BYTES, OUTPUT_FLOOR_ERROR
from murmur_wsgi.agents.spec import AgentField
from murmur_wsgi.loading import read_yaml
from murmur_wsgi.settings import (Block, ManifestError, Seconds, Size, StrictInt, first_error,
                                  first_unencodable)

logger = logging.getLogger(__name__)

DOOR_SCOPES = ("SendMessage", "SendStreamingMessage", "murmur.WatchSession", "GetTask",
               "ListTasks", "CancelTask", "SubscribeToTask", "murmur.StopSession",
               "resources/files")

# A2A 0.3 and old murmur scope names, and the v1.0 name that replaces each.
OLD_SCOPES = {"message/send": "SendMessage", "message/stream": "SendStreamingMessage",
              "tasks/get": "GetTask", "tasks/cancel": "CancelTask",
              "tasks/resubscribe": "SubscribeToTask", "tasks/list": "ListTasks",
              "stream/watch": "murmur.WatchSession", "session/stop": "murmur.StopSession"}

CREDENTIAL_NAME = re.compile(r"^[a-z][a-z0-9_-]{0,31}$")
_CONTROL = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")       # what a header value cannot hold


class LifecycleSchema(Block):
    task_acceptance = fields.String(load_default="single",
                                    validate=validate.OneOf(["none", "single", "queue"]))
    queue_depth = StrictInt(load_default=1, validate=validate.Range(min=0))
    after_task = fields.String(load_default="sleep", validate=validate.OneOf(["sleep", "exit"]))
    input_timeout_secs = Seconds(load_default=None, allow_none=True,
                                      validate=validate.Range(min=0, min_inclusive=False))
    conversation = fields.String(load_default="stateless",
                                 validate=validate.OneOf(["stateless", "threaded"]))


class AllowSchema(Block):
    allow = fields.List(fields.String(), load_default=list)


class ShellSchema(AllowSchema):
    # Background commands running at once in the session: each is a process of the host.
    max_running = StrictInt(load_default=16, validate=validate.Range(min=1))
    # The longest command the agent may start: splitting one takes time growing with the
    # square of its longest word, on the task's greenlet (gevent's loop).
    max_command_bytes = Size(load_default=64 * 1024, validate=validate.Range(min=1))


class CapabilitiesSchema(Block):
    shell = fields.Nested(ShellSchema, load_default=dict)
    network = fields.Nested(AllowSchema, load_default=dict)


class FilesSchema(Block):
    root = fields.String(required=True, validate=validate.Length(min=1))
    mode = fields.String(load_default="read-only", validate=validate.OneOf(["read-only"]))
    max_bytes = Size(load_default=10 * 1024 ** 2)
    max_depth = StrictInt(load_default=64, validate=validate.Range(min=1, max=256))
    max_entries = StrictInt(load_default=10_000, validate=validate.Range(min=1, max=1_000_000))

    @validates_schema
    def _relative(self, data, **kwargs):
        root = data.get("root", "")
        if root.startswith("/") or ".." in root.replace("\\", "/").split("/"):
            raise ValidationError("must be a relative path without ..", "root")
        # NOTE: every read of the plane names the root in X-Murmur-Export-Root, and a header
        # value holds no control character but HTAB: a root with one failed every read.
        if _CONTROL.search(root):
            raise ValidationError("must hold no control character (a line break, NUL, …)",
                                  "root")


class PeerTasksSchema(Block):
    accept = fields.Boolean(required=True, truthy={True}, falsy={False})


class ExportsSchema(Block):
    files = fields.Nested(FilesSchema, load_default=None, allow_none=True)
    peer_tasks = fields.Nested(PeerTasksSchema, load_default=None, allow_none=True)


class CredentialSchema(Block):
    scopes = fields.List(fields.String(), required=True)

    @validates_schema
    def _scopes(self, data, **kwargs):
        scopes = data.get("scopes", [])
        if not scopes:
            raise ValidationError("must list at least one scope", "scopes")
        for scope in scopes:
            if scope in OLD_SCOPES:
                older = "a murmur method's older" if OLD_SCOPES[scope].startswith("murmur.") \
                    else "an A2A 0.3"
                raise ValidationError(f"'{scope}' is {older} name; use '{OLD_SCOPES[scope]}'",
                                      "scopes")
            if scope not in DOOR_SCOPES:
                raise ValidationError(f"'{scope}' is not a door scope; one of "
                                      + ", ".join(DOOR_SCOPES), "scopes")
        if len(set(scopes)) != len(scopes):
            raise ValidationError("lists a scope more than once", "scopes")


class AuthenticationSchema(Block):
    scheme = fields.String(required=True, validate=validate.OneOf(["bearer"]))
    credentials = fields.Dict(keys=fields.String(), values=fields.Nested(CredentialSchema),
                              load_default=dict)

    @validates_schema
    def _names(self, data, **kwargs):
        for name in data.get("credentials", {}):
            # NOTE: the credential's name is the key named: credentials.<name>.
            if name == "operator":
                raise ValidationError({name: ["is reserved for the operator's token"]},
                                      "credentials")
            if not CREDENTIAL_NAME.fullmatch(name):
                raise ValidationError({name: ["is not a credential name: it must match "
                                              "^[a-z][a-z0-9_-]{0,31}$"]}, "credentials")


class NetworkSchema(Block):
    host = fields.String(load_default="127.0.0.1")
    internal_port = StrictInt(load_default=None, allow_none=True,
                              validate=validate.Range(min=0, max=65535))
    public_url = fields.Url(load_default=None, allow_none=True, require_tld=False,
                            schemes={"http", "https"})
    authentication = fields.Nested(AuthenticationSchema, load_default=None, allow_none=True)

    @validates_schema
    def _public_port(self, data, **kwargs):
        # NOTE: the URL validator takes any digits after the host: the card would announce
        # an address no client can connect to (http://x:99999, http://x:0).
        url = data.get("public_url")
        try:
            port = urlsplit(url).port if url else None
        except ValueError:
            port = 0
        if port == 0:
            raise ValidationError("must name a port from 1 to 65535", "public_url")


class ImagesSchema(Block):
    max_bytes = Size(load_default=5 * 1024 ** 2)
    max_per_turn = StrictInt(load_default=8, validate=validate.Range(min=0))


class ContextSchema(Block):
    images = fields.Nested(ImagesSchema, load_default=dict)


class StreamSchema(Block):
    # MEMORY: the ring holds a slot for each of them from the start (8 bytes a slot).
    replay_events = StrictInt(load_default=512, validate=validate.Range(min=1, max=1_000_000))
    # The replay buffer's events by their size: past it the oldest go, as past replay_events.
    replay_bytes = Size(load_default=64 * 1024 ** 2)
    reader_queue = StrictInt(load_default=128, validate=validate.Range(min=1))
    heartbeat_secs = Seconds(load_default=15.0, validate=validate.Range(min=0, min_inclusive=False))
    # Every write of a response or a stream (at most pending_bytes) is taken by the
    # client within this many seconds, or the connection is cut.
    write_timeout_secs = Seconds(load_default=10.0,
                                      validate=validate.Range(min=0, min_inclusive=False))
    # What one response or stream may have rendered but not yet written.
    pending_bytes = Size(load_default=256 * 1024)


class TasksSchema(Block):
    keep_finished = StrictInt(load_default=10_000, validate=validate.Range(min=1))  # per owner
    keep_finished_total = StrictInt(load_default=50_000, validate=validate.Range(min=1))
    keep_finished_secs = Seconds(load_default=86_400.0,
                                      validate=validate.Range(min=0, min_inclusive=False))
    # The size of the finished tasks kept (record.size()): per owner, and every owner together.
    keep_finished_bytes = Size(load_default=256 * 1024 ** 2)
    keep_finished_bytes_total = Size(load_default=1024 ** 3)
    # What one task's agent writes while it runs (agents/output.py): past it the task fails.
    max_output_bytes = Size(load_default=MAX_OUTPUT_BYTES, validate=validate.Range(
        min=MIN_OUTPUT_BYTES, error=OUTPUT_FLOOR_ERROR))
    # The distinct models one task's usage names (ctx.usage(model=)): each costs memory.
    max_usage_models = StrictInt(load_default=1_000, validate=validate.Range(min=1))


class LimitsSchema(Block):
    """What one request may ask of the door; each is refused before the work it bounds."""

    max_body_bytes = Size(load_default=None)        # None: BODY_BYTES, or more (see below)
    max_parts = StrictInt(load_default=1_000, validate=validate.Range(min=1))
    # NOTE: a SendMessage's parts sit at depth 5 (envelope, params, message, parts, a part).
    max_json_depth = StrictInt(load_default=64, validate=validate.Range(
        min=5, error="must be at least 5: a message's parts sit at depth 5"))
    # NOTE: the smallest SendMessage holds 11 values (envelope 5, message 4, a part 2).
    max_json_values = StrictInt(load_default=1_000_000, validate=validate.Range(
        min=11, error="must be at least 11: the smallest SendMessage holds 11 values"))
    reference_bytes = Size(load_default=64 * 1024)
    data_text_bytes = Size(load_default=16 * 1024 ** 2)
    # From a connection's accept (or the first byte of a later request) to its headers' end.
    header_timeout_secs = Seconds(load_default=10.0,
                                       validate=validate.Range(min=0, min_inclusive=False))
    # From the end of a request's headers to the end of its body.
    body_timeout_secs = Seconds(load_default=30.0,
                                     validate=validate.Range(min=0, min_inclusive=False))


BODY_BYTES = 64 * 1024 ** 2           # limits.max_body_bytes when unset
BODY_ROOM = 1024 ** 2                 # beyond the images: the envelope, text and data parts


def image_payload_bytes(images: dict) -> int:
    """The base64 bytes of the largest image payload ``context.images`` lets one message carry."""
    return -(-images["max_bytes"] // 3) * 4 * images["max_per_turn"]


class InferenceSchema(Schema):
    class Meta:
        unknown = EXCLUDE          # model, max_turns, command: the runtime's, not the door's

    transport = fields.String(load_default="http", validate=validate.OneOf(["http", "process"]))


class ObservabilitySchema(Block):
    metrics = fields.Boolean(load_default=False)
    access_log = fields.Boolean(load_default=False)   # opt-in, like gunicorn's access log
    # Every field of a log record (and value in its message) is cut past this.
    log_field_chars = StrictInt(load_default=256, validate=validate.Range(
        min=64, error="must be at least 64: a cut field ends with its mark, …[cut: <n> chars]"))


class ManifestSchema(Block):
    name = fields.String(required=True, validate=validate.Length(min=1))
    version = fields.String(required=True, validate=validate.Length(min=1))
    lifecycle = fields.Nested(LifecycleSchema, load_default=dict)
    tools = fields.List(fields.String(), load_default=list)
    capabilities = fields.Nested(CapabilitiesSchema, load_default=dict)
    exports = fields.Nested(ExportsSchema, load_default=dict)
    network = fields.Nested(NetworkSchema, load_default=dict)
    context = fields.Nested(ContextSchema, load_default=dict)
    stream = fields.Nested(StreamSchema, load_default=dict)
    tasks = fields.Nested(TasksSchema, load_default=dict)
    limits = fields.Nested(LimitsSchema, load_default=dict)
    inference = fields.Nested(InferenceSchema, load_default=dict)
    agent = AgentField(load_default="demo")
    observability = fields.Nested(ObservabilitySchema, load_default=dict)

    @validates_schema
    def _agent_transport(self, data, **kwargs):
        process = isinstance(data.get("agent"), dict)
        transport = data.get("inference", {}).get("transport", "http")
        if process and transport != "process":
            raise ValidationError("{process: [...]} needs inference.transport: process", "agent")
        if transport == "process" and not process:
            raise ValidationError("inference.transport: process needs agent: {process: [cmd, ...]}",
                                  "agent")

    @validates_schema
    def _images_fit_the_body(self, data, **kwargs):
        limits, images = data.get("limits"), data.get("context", {}).get("images")
        if not (limits and images) or limits["max_body_bytes"] is None:
            return
        payload = image_payload_bytes(images)
        if payload > limits["max_body_bytes"]:
            raise ValidationError({"max_body_bytes": [
                f"is smaller than the {payload} bytes of base64 that context.images lets one "
                "message carry"]}, "limits")

    @post_load
    def _body_default(self, data, **kwargs):
        """Unset, the body limit is 64 MiB, or what context.images needs when that is more."""
        limits = data["limits"]
        if limits["max_body_bytes"] is None:
            payload = image_payload_bytes(data["context"]["images"])
            limits["max_body_bytes"] = max(BODY_BYTES, payload + BODY_ROOM)
        return data


@dataclass
class Manifest:
    """A validated manifest; nested blocks are plain dicts with defaults filled."""

    name: str
    version: str
    lifecycle: dict = field(default_factory=dict)
    tools: list = field(default_factory=list)
    capabilities: dict = field(default_factory=dict)
    exports: dict = field(default_factory=dict)
    network: dict = field(default_factory=dict)
    context: dict = field(default_factory=dict)
    stream: dict = field(default_factory=dict)
    tasks: dict = field(default_factory=dict)
    limits: dict = field(default_factory=dict)
    inference: dict = field(default_factory=dict)
    agent: Any = "demo"
    observability: dict = field(default_factory=dict)

    @property
    def acceptance(self) -> str:
        return self.lifecycle["task_acceptance"]

    @property
    def authentication(self) -> dict | None:
        return self.network.get("authentication")

    @property
    def transport(self) -> str:
        return self.inference["transport"]

    @property
    def peer_accept(self) -> bool:
        block = self.exports.get("peer_tasks")
        return bool(block and block["accept"])


# The texts read as a file system's bytes (surrogateescape: a name that is not UTF-8 is one).
# NOTE: exports.files.root is not one: the listing names it in JSON, which cannot carry it.
AS_BYTES = frozenset({"agent.process"})


# PERF: one schema for every load: a new one copies its fields and makes each nested
# schema again; a load keeps no state on it.
_SCHEMA = ManifestSchema()


def _not_bytes(data) -> str | None:
    """The path of the first text of ``AS_BYTES`` that is no file system's bytes: a
    surrogate outside surrogateescape's (U+DC80 to U+DCFF), which the harness's spawn
    cannot encode (every task failed), or None."""
    agent = data.get("agent") if isinstance(data, dict) else None
    process = agent.get("process") if isinstance(agent, dict) else None
    if not isinstance(process, list):
        return None
    for i, arg in enumerate(process):
        if isinstance(arg, str):
            try:
                os.fsencode(arg)
            except UnicodeEncodeError:
                return f"agent.process[{i}]"
    return None


def load_manifest(data: dict | Manifest) -> Manifest:
    """Validate a mapping (or pass a Manifest through); raise ManifestError."""
    if isinstance(data, Manifest):
        return data
    # NOTE: a lone surrogate ("\ud800" in YAML) passed: the card then held an escape no
    # JSON reader takes back, and a header or a log line could not be written.
    where = first_unencodable(data, AS_BYTES)
    if where is not None:
        raise ManifestError(f"{where}: holds a character that is not text (a lone surrogate: "
                            "a YAML escape such as \\ud800)")
    where = _not_bytes(data)
    if where is not None:
        raise ManifestError(f"{where}: holds a character that is not text (a lone surrogate: "
                            "a YAML escape such as \\ud800)")
    try:
        loaded = _SCHEMA.load(data)
    except ValidationError as ex:
        raise ManifestError(first_error(ex.messages)) from None
    return Manifest(**loaded)


def load_manifest_file(path: str) -> Manifest:
    """Read and validate ``murmur.yaml``; every failure is one line."""
    data = read_yaml(path, ManifestError)
    try:
        return load_manifest(data)
    except ManifestError as ex:
        raise ManifestError(f"{path}: {ex}") from None
