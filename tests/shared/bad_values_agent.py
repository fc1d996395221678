"""An agent handing over a value that is not JSON, chosen by its text (door and hub tests)."""
from __future__ import annotations

from murmur_wsgi.agents import Completed, DataPart, strip_untrusted_fence

SURROGATE = "bad \ud800 text"


class Opaque:
    """An object JSON knows nothing of."""


RETURNS = {
    "return-nan": lambda: float("nan"),
    "return-infinity": lambda: float("inf"),
    "return-set": lambda: {1, 2},
    "return-bytes": lambda: b"raw",
    "return-object": Opaque,
    "return-surrogate": lambda: SURROGATE,
    "return-data-nan": lambda: {"words": float("nan")},
    "return-status-surrogate": lambda: Completed("fine", status_message=SURROGATE),
}


def _artifact_data(ctx):
    ctx.artifacts.add("table", DataPart({"rows": {1, 2}}))


def _artifact_text(ctx):
    ctx.artifacts.add("notes", SURROGATE)


def _data_part(ctx):
    with ctx.artifacts.stream("numbers") as out:
        out.write({"n": 1})
        out.write(DataPart(float("-inf")))


def _usage_count(ctx):
    ctx.usage(input_tokens=float("nan"))


def _usage_model(ctx):
    ctx.usage(input_tokens=1, model=SURROGATE)


def _token(ctx):
    ctx.write("fine so far")
    ctx.write(SURROGATE)


def _progress(ctx):
    ctx.progress(SURROGATE)


CALLS = {"artifact-data": _artifact_data, "artifact-text": _artifact_text,
         "data-part": _data_part, "usage-count": _usage_count, "usage-model": _usage_model,
         "token": _token, "progress": _progress}

ENDINGS = sorted(RETURNS) + sorted(CALLS)

# Values the door keeps but the hub refuses: its clients read every number as a double, so
# an integer no double holds is not a value they can read back; nor is a progress that is
# not a text, or a usage count past 2**53 - 1.
WIDE = 10 ** 400


def _wide_artifact(ctx):
    ctx.artifacts.add("table", DataPart({"rows": [1, -WIDE]}))


def _wide_artifact_metadata(ctx):
    ctx.artifacts.add("table", "rows", metadata={"n": WIDE})


def _wide_stream_metadata(ctx):
    with ctx.artifacts.stream("numbers", metadata={"n": [WIDE]}) as out:
        out.write("one")


def _wide_usage(ctx):
    ctx.usage(input_tokens=WIDE)


def _usage_sum(ctx):
    ctx.usage(output_tokens=2 ** 53 - 1)
    ctx.usage(output_tokens=2)


def _progress_number(ctx):
    ctx.progress(WIDE)


# Nor a value nested past what protobuf's JSON parser reads (a2a-sdk: 100 levels, two a
# JSON level): a task holding it would be unreadable to every client.
def _deep(levels: int = 50):
    value = "x"
    for i in range(levels):
        value = [value] if i % 2 else {"k": value}
    return value


def _deep_artifact(ctx):
    ctx.artifacts.add("table", DataPart(_deep()))


def _deep_artifact_metadata(ctx):
    ctx.artifacts.add("table", "rows", metadata={"n": _deep()})


HUB_RETURNS = {"return-wide-integer": lambda: {"n": [WIDE]},
               "return-wide-completed": lambda: Completed({"n": WIDE}),
               "return-deep": _deep}
HUB_CALLS = {"artifact-wide-integer": _wide_artifact,
             "artifact-wide-metadata": _wide_artifact_metadata,
             "stream-wide-metadata": _wide_stream_metadata,
             "artifact-deep": _deep_artifact, "artifact-deep-metadata": _deep_artifact_metadata,
             "usage-wide-integer": _wide_usage, "usage-sum": _usage_sum,
             "progress-number": _progress_number}
RETURNS.update(HUB_RETURNS)
CALLS.update(HUB_CALLS)
HUB_ENDINGS = sorted(HUB_RETURNS) + sorted(HUB_CALLS)


def bad(ctx):
    """Hand over the bad value its text names; never catch what the call raises."""
    word = strip_untrusted_fence(ctx.text).strip()
    if word in RETURNS:
        return RETURNS[word]()
    CALLS[word](ctx)
    return "the bad value was taken"


def counts(ctx):
    """Answer a dict (JSON text on the door, a data part on the hub)."""
    return {"words": len(strip_untrusted_fence(ctx.text).split())}
