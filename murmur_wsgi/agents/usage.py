"""What a task's run consumed: tokens per model, as its agent reported them (``ctx.usage``).

The door keeps it on the task record (``TaskRecord.usage``) and writes none of
it on the wire; the hub turns it into its answer's usage part.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass

from murmur_wsgi.agents.endings import AgentValueError, check_text

logger = logging.getLogger(__name__)

# MEMORY: what one model a run's usage names costs beside its name (its entry and its
# counts; measured: 160 bytes), for what a finished task holds (door/tasks/record.py).
MODEL_BYTES = 160


@dataclass(slots=True)
class TokenCounts:
    """Token counts: what one model, or the whole run, consumed."""

    input_tokens: int = 0
    output_tokens: int = 0
    cached_tokens: int = 0

    @property
    def total(self) -> int:
        """Input plus output tokens (cached input is part of the input)."""
        return self.input_tokens + self.output_tokens


def _count(name: str, value) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise AgentValueError(f"usage: {name} must be a non-negative integer, "
                              f"not {type(value).__name__}")
    if value < 0:
        raise ValueError(f"usage: {name} must be a non-negative integer")
    return value


class RunUsage:
    """The usage of one run, accumulated per model in the order models were first reported.

    Every ``add`` under one ``model`` adds to that model's counts; ``model=None``
    counts tokens whose model the agent did not name.

    Concurrency:
        Changed and read under the task store's lock (``TaskManager.record_usage``).
    """

    __slots__ = ("by_model", "_totals")

    def __init__(self):
        self.by_model: dict[str | None, TokenCounts] = {}
        # PERF: kept as reports add up: a sum over the models at each report made a run
        # naming n models cost n^2 / 2 (8,000 models: 1.9 s of CPU under the run's lock).
        self._totals = TokenCounts()

    @staticmethod
    def check(input_tokens=0, output_tokens=0, cached_tokens=0, model=None) -> tuple:
        """Validate one report; return it as a tuple for ``add``.

        Raises:
            ValueError: a count is negative, or model an empty str.
            AgentValueError (a ValueError): a count is not an integer (NaN, a float, a
                set …), or model is not a str or holds a lone surrogate.
        """
        counts = (_count("input_tokens", input_tokens), _count("output_tokens", output_tokens),
                  _count("cached_tokens", cached_tokens))
        if model is not None:
            if not isinstance(model, str):
                raise AgentValueError(f"usage: model must be a non-empty string or None, "
                                      f"not {type(model).__name__}")
            if not model:
                raise ValueError("usage: model must be a non-empty string or None")
            check_text(model, "usage: model")
        return counts + (model,)

    def check_room(self, model: str | None, most: int, setting: str) -> bool:
        """True when ``model`` is new to the run; AgentValueError when it is new and the run
        names ``most`` models already (``setting`` names that bound).

        MEMORY: each model kept costs ``MODEL_BYTES`` beside its name: counting its name's
        bytes alone let a run naming millions hold gigabytes.
        """
        if model in self.by_model:
            return False
        # NOTE: tokens reported without a model (None, kept as an entry) name no model.
        if model is not None and len(self.by_model) - (None in self.by_model) >= most:
            raise AgentValueError(f"usage: more than {most} models in one run ({setting})")
        return True

    def add(self, input_tokens: int, output_tokens: int, cached_tokens: int,
            model: str | None) -> None:
        """Add one checked report (see ``check``)."""
        counts = self.by_model.get(model)
        if counts is None:
            counts = self.by_model[model] = TokenCounts()
        counts.input_tokens += input_tokens
        counts.output_tokens += output_tokens
        counts.cached_tokens += cached_tokens
        totals = self._totals
        totals.input_tokens += input_tokens
        totals.output_tokens += output_tokens
        totals.cached_tokens += cached_tokens

    @property
    def totals(self) -> TokenCounts:
        """The run's counts over every model (a copy)."""
        totals = self._totals
        return TokenCounts(totals.input_tokens, totals.output_tokens, totals.cached_tokens)

    @property
    def models(self) -> list[str]:
        """The models named, in the order they were first reported."""
        return [model for model in self.by_model if model is not None]

    @property
    def top_model(self) -> str | None:
        """The named model with most tokens (the first reported of equals), or None."""
        best, best_total = None, -1
        for model, counts in self.by_model.items():
            if model is not None and counts.total > best_total:
                best, best_total = model, counts.total
        return best

    def to_dict(self) -> dict:
        """``{"input_tokens", "output_tokens", "cached_tokens", "model", "by_model"}``.

        A plain copy (the record's own object keeps changing while the task runs).
        """
        totals = self.totals
        return {"input_tokens": totals.input_tokens, "output_tokens": totals.output_tokens,
                "cached_tokens": totals.cached_tokens, "model": self.top_model,
                "by_model": {model: {"input_tokens": c.input_tokens,
                                     "output_tokens": c.output_tokens,
                                     "cached_tokens": c.cached_tokens}
                             for model, c in self.by_model.items()}}

    def __repr__(self):
        return f"<RunUsage {self.to_dict()}>"
