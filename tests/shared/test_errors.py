"""The error catalogue in errors.py against the spec's tables ("Errors", "Completion errors")."""
from __future__ import annotations

import json

import pytest
from google.protobuf import any_pb2, json_format
from google.rpc import error_details_pb2

from murmur_wsgi import errors

# murmur-door.txt, "Errors": the standard JSON-RPC errors, which carry no data.
STANDARD = {
    -32700: ("ParseError", "Invalid JSON payload"),
    -32600: ("InvalidRequestError", "Request payload validation error"),
    -32601: ("MethodNotFoundError", "Method not found"),
    -32602: ("InvalidParamsError", None),          # names the parameter
    -32603: ("InternalError", None),               # names the failure
}

# murmur-door.txt, "Errors" (A2A) and "Completion errors" (murmur): code -> (Error, reason).
A2A = {
    -32001: ("TaskNotFoundError", "TASK_NOT_FOUND"),
    -32002: ("TaskNotCancelableError", "TASK_NOT_CANCELABLE"),
    -32003: ("PushNotificationNotSupportedError", "PUSH_NOTIFICATION_NOT_SUPPORTED"),
    -32004: ("UnsupportedOperationError", "UNSUPPORTED_OPERATION"),
    -32005: ("ContentTypeNotSupportedError", "CONTENT_TYPE_NOT_SUPPORTED"),
    -32006: ("InvalidAgentResponseError", "INVALID_AGENT_RESPONSE"),
    -32007: ("ExtendedAgentCardNotConfiguredError", "EXTENDED_AGENT_CARD_NOT_CONFIGURED"),
    -32008: ("ExtensionSupportRequiredError", "EXTENSION_SUPPORT_REQUIRED"),
    -32009: ("VersionNotSupportedError", "VERSION_NOT_SUPPORTED"),
}
MURMUR = {
    -31001: ("CompletionMisaddressedError", "COMPLETION_MISADDRESSED"),
    -31002: ("CompletionNotAwaitedError", "COMPLETION_NOT_AWAITED"),
}

# One instance of each, built as the door builds it.
SAMPLES = {
    -32700: lambda: errors.ParseError(),
    -32600: lambda: errors.InvalidRequestError(),
    -32601: lambda: errors.MethodNotFoundError(),
    -32602: lambda: errors.InvalidParamsError("GetTask requires an id"),
    -32603: lambda: errors.InternalError(),
    -32001: lambda: errors.TaskNotFoundError("tsk_1"),
    -32002: lambda: errors.TaskNotCancelableError("tsk_1", "TASK_STATE_COMPLETED"),
    -32003: lambda: errors.PushNotificationNotSupportedError(),
    -32004: lambda: errors.UnsupportedOperationError(),
    -32005: lambda: errors.ContentTypeNotSupportedError(
        "message.parts[1] is a url part; this agent reads text parts, data parts and image "
        "raw parts only", partIndex=1, mediaType="application/pdf"),
    -32006: lambda: errors.InvalidAgentResponseError(),
    -32007: lambda: errors.ExtendedAgentCardNotConfiguredError(),
    -32008: lambda: errors.ExtensionSupportRequiredError(),
    -32009: lambda: errors.VersionNotSupportedError(""),
    -31001: lambda: errors.CompletionMisaddressedError("ses_other"),
    -31002: lambda: errors.CompletionNotAwaitedError("dlg_1"),
}


def test_catalogue_lists_exactly_the_spec_codes():
    assert set(errors.CATALOGUE) == set(STANDARD) | set(A2A) | set(MURMUR)
    assert set(SAMPLES) == set(errors.CATALOGUE)


@pytest.mark.parametrize("code", sorted(STANDARD))
def test_standard_errors(code):
    cls = errors.CATALOGUE[code]
    name, message = STANDARD[code]
    assert cls.__name__ == name
    assert cls.code == code
    assert issubclass(cls, errors.RpcError) and not issubclass(cls, errors.A2AError)
    error = SAMPLES[code]()
    obj = error.error_object()
    assert list(obj) == ["code", "message"]            # no data
    assert obj["code"] == code
    if message is not None:
        assert obj["message"] == message
    assert isinstance(obj["message"], str) and obj["message"]


@pytest.mark.parametrize("code", sorted(A2A) + sorted(MURMUR))
def test_a2a_and_murmur_errors(code):
    cls = errors.CATALOGUE[code]
    name, reason = A2A.get(code) or MURMUR[code]
    domain = "a2a-protocol.org" if code in A2A else "murmur.nexus"
    assert cls.__name__ == name
    assert (cls.code, cls.reason, cls.domain) == (code, reason, domain)
    assert issubclass(cls, errors.A2AError)
    assert issubclass(cls, errors.MurmurError) == (code in MURMUR)
    obj = SAMPLES[code]().error_object()
    assert list(obj) == ["code", "message", "data"]
    assert obj["code"] == code
    [info] = obj["data"]
    assert list(info) == ["@type", "reason", "domain", "metadata"]
    assert info["@type"] == "type.googleapis.com/google.rpc.ErrorInfo"
    assert (info["reason"], info["domain"]) == (reason, domain)
    assert all(isinstance(k, str) and isinstance(v, str) for k, v in info["metadata"].items())
    # The data is a google.rpc.ErrorInfo in ProtoJSON's Any form.
    parsed = json_format.Parse(json.dumps(info), any_pb2.Any(), ignore_unknown_fields=False)
    unpacked = error_details_pb2.ErrorInfo()
    assert parsed.Unpack(unpacked)
    assert (unpacked.reason, unpacked.domain) == (reason, domain)
    assert dict(unpacked.metadata) == info["metadata"]


def test_codes_outside_reserved_range_are_murmurs():
    for code in MURMUR:
        assert not -32768 <= code <= -32000
    for code in list(A2A) + list(STANDARD):
        assert -32768 <= code <= -32000


@pytest.mark.parametrize("code, message, metadata", [
    pytest.param(-32001, "Task not found", {"taskId": "tsk_1"}, id="-32001"),
    pytest.param(-32002, "Task cannot be canceled: it is already TASK_STATE_COMPLETED",
                 {"taskId": "tsk_1", "state": "TASK_STATE_COMPLETED"}, id="-32002"),
    pytest.param(-32003, "push notifications are not supported by this agent", {}, id="-32003"),
    pytest.param(-32004, None, {}, id="-32004"),
    pytest.param(-32005, "message.parts[1] is a url part; this agent reads text parts, data "
                 "parts and image raw parts only", {"partIndex": "1",
                                                    "mediaType": "application/pdf"},
                 id="-32005"),
    pytest.param(-32009, "A2A version '' is not supported; this agent speaks 1.0",
                 {"requestedVersion": "", "supportedVersions": "1.0"}, id="-32009"),
    pytest.param(-31001, None, {"addressedSession": "ses_other"}, id="-31001"),
    pytest.param(-31002, "no task in this session is waiting for delegation dlg_1",
                 {"delegationId": "dlg_1"}, id="-31002"),
])
def test_spec_examples(code, message, metadata):
    obj = SAMPLES[code]().error_object()
    if message is not None:
        assert obj["message"] == message
    assert obj["data"][0]["metadata"] == metadata
    assert list(obj["data"][0]["metadata"]) == list(metadata)


def test_completion_misaddressed_without_a_session():
    obj = errors.CompletionMisaddressedError("").error_object()
    assert obj["data"][0]["metadata"] == {"addressedSession": ""}


def test_completion_not_awaited_without_a_delegation():
    obj = errors.CompletionNotAwaitedError(None).error_object()
    assert obj["data"][0]["metadata"] == {}


def test_refusals():
    assert (errors.Unauthenticated.status, errors.Unauthenticated.error) == (401,
                                                                              "unauthenticated")
    assert (errors.InvalidToken.status, errors.InvalidToken.error) == (401, "invalid_token")
    assert (errors.PeerNotAccepted.status, errors.PeerNotAccepted.error) == (403,
                                                                              "peer_not_accepted")
    scope = errors.InsufficientScope("watcher", "SendMessage", 'Bearer realm="my-agent"')
    assert (scope.status, scope.error) == (403, "insufficient_scope")
    assert scope.body() == {"error": "insufficient_scope",
                            "message": "credential 'watcher' does not reach SendMessage"}
    assert list(scope.body()) == ["error", "message"]
    assert scope.challenge == ('Bearer realm="my-agent", error="insufficient_scope", '
                               'scope="SendMessage"')
    for cls in (errors.NotFound, errors.Unauthenticated, errors.InvalidToken,
                errors.PeerNotAccepted):
        assert issubclass(cls, errors.Refusal) and issubclass(cls, errors.DoorError)
        assert not issubclass(cls, errors.RpcError)
