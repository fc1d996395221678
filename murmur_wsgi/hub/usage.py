"""The usage part of a COMPLETED task: what its run reported (``ctx.usage``), priced.

``pricing.<model>`` gives micro-credits per million input, output and cached
tokens. Cached tokens are part of the input tokens: they are charged at
``cached`` (``input`` when it has none), the rest of the input at ``input``.
"""
from __future__ import annotations

import logging
from decimal import ROUND_HALF_UP, Decimal

from murmur_wsgi.agents.usage import RunUsage
from murmur_wsgi.wire.encode import compact_utf8

logger = logging.getLogger(__name__)

MILLION = Decimal(1_000_000)
_NOTHING = RunUsage()           # a run that reported nothing (only ever read)


def _price(value) -> Decimal:
    return Decimal(str(value))


def usage_part(usage: RunUsage | None, pricing: dict) -> dict:
    """``{"usage": {...}}``, the keys in the order "Run usage" lists them (``usage`` None:
    the run reported nothing)."""
    if usage is None:           # PERF: one empty RunUsage read, not one made a run
        usage = _NOTHING
    micros = None               # PERF: no Decimal arithmetic for a run that priced nothing
    priced = True
    for model, counts in usage.by_model.items():
        if not (counts.input_tokens or counts.output_tokens or counts.cached_tokens):
            continue
        price = pricing.get(model) if model is not None else None
        if price is None:
            priced = False
            continue
        cached = price["cached"] if price["cached"] is not None else price["input"]
        uncached = max(0, counts.input_tokens - counts.cached_tokens)
        cost = (uncached * _price(price["input"]) + counts.cached_tokens * _price(cached)
                + counts.output_tokens * _price(price["output"])) / MILLION
        micros = cost if micros is None else micros + cost
    credits_micros = 0 if micros is None else int(micros.quantize(Decimal(1),
                                                                  rounding=ROUND_HALF_UP))
    totals = usage.totals
    out = {"input_tokens": totals.input_tokens, "output_tokens": totals.output_tokens}
    if totals.cached_tokens:
        out["cached_tokens"] = totals.cached_tokens
    out["credits"] = credits_micros / 1_000_000
    out["credits_micros"] = credits_micros
    out["pricing_status"] = "priced" if priced else "unpriced"
    model = usage.top_model
    if model is not None:
        out["model"] = model
        if len(usage.models) > 1:
            out["models"] = len(usage.models)
    return {"usage": out}


# What ``usage_part`` gives a run that reported nothing, whatever the pricing, and its JSON.
_NOTHING_USAGE = usage_part(None, {})["usage"]
_NOTHING_JSON = compact_utf8({"usage": _NOTHING_USAGE})


def usage_part_json(usage: RunUsage | None, pricing: dict) -> tuple[dict, str]:
    """``usage_part``'s value and its JSON (``compact_utf8``'s). PERF: a run that reported
    nothing (most) is given a copy of one value and one text, worked out once: not the
    totals' copy, the models' search and the dict made anew (about 4 K instructions)."""
    if usage is None:
        return {"usage": dict(_NOTHING_USAGE)}, _NOTHING_JSON   # its own (a store keeps it)
    part = usage_part(usage, pricing)
    return part, compact_utf8(part)
