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

# Integers no double holds: JSON, which the door keeps, but the hub's clients read every
# number as a double, so on the hub they are not values the agent can hand over.
WIDE = 10 ** 400


def _wide_artifact(ctx):
    ctx.artifacts.add("table", DataPart({"rows": [1, -WIDE]}))


def _wide_usage(ctx):
    ctx.usage(input_tokens=WIDE)


WIDE_RETURNS = {"return-wide-integer": lambda: {"n": [WIDE]},
                "return-wide-completed": lambda: Completed({"n": WIDE})}
WIDE_CALLS = {"artifact-wide-integer": _wide_artifact, "usage-wide-integer": _wide_usage}
RETURNS.update(WIDE_RETURNS)
CALLS.update(WIDE_CALLS)
WIDE_ENDINGS = sorted(WIDE_RETURNS) + sorted(WIDE_CALLS)


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
