"""Run usage: the tokens a run reported per model, priced from ``pricing``.

``pricing.<model>`` gives micro-credits per million input, output and cached
tokens. Cached tokens are part of the input tokens: they are charged at
``cached`` (``input`` when it has none), the rest of the input at ``input``.
"""
from __future__ import annotations

import logging
from decimal import ROUND_HALF_UP, Decimal

logger = logging.getLogger(__name__)

MILLION = Decimal(1_000_000)


class Usage:
    """Token totals per model; one per run (``ctx.usage(...)`` adds to it)."""

    __slots__ = ("models",)

    def __init__(self):
        self.models: dict[str | None, list[int]] = {}    # model -> [input, output, cached]

    def add(self, input_tokens: int = 0, output_tokens: int = 0, cached_tokens: int = 0,
            model: str | None = None) -> None:
        for value in (input_tokens, output_tokens, cached_tokens):
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise ValueError("usage: token counts are whole numbers, 0 or more")
        totals = self.models.setdefault(model, [0, 0, 0])
        totals[0] += input_tokens
        totals[1] += output_tokens
        totals[2] += cached_tokens

    def part(self, pricing: dict) -> dict:
        """The usage data part's value: ``{"usage": {...}}`` as "Run usage" lists it."""
        inp = sum(t[0] for t in self.models.values())
        out = sum(t[1] for t in self.models.values())
        cached = sum(t[2] for t in self.models.values())
        micros = Decimal(0)
        priced = True
        for model, (m_in, m_out, m_cached) in self.models.items():
            if not (m_in or m_out or m_cached):
                continue
            price = pricing.get(model) if model is not None else None
            if price is None:
                priced = False
                continue
            cached_price = price["cached"] if price["cached"] is not None else price["input"]
            micros += (Decimal(max(0, m_in - m_cached)) * Decimal(str(price["input"]))
                       + Decimal(m_cached) * Decimal(str(cached_price))
                       + Decimal(m_out) * Decimal(str(price["output"]))) / MILLION
        credits_micros = int(micros.quantize(Decimal(1), rounding=ROUND_HALF_UP))
        usage = {"input_tokens": inp, "output_tokens": out}
        if cached:
            usage["cached_tokens"] = cached
        usage["credits"] = credits_micros / 1_000_000
        usage["credits_micros"] = credits_micros
        usage["pricing_status"] = "priced" if priced else "unpriced"
        named = {m: sum(t) for m, t in self.models.items() if m is not None}
        if named:
            usage["model"] = max(named, key=lambda m: named[m])
            if len(named) > 1:
                usage["models"] = len(named)
        return {"usage": usage}
