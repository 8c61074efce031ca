"""A Jinja2 sandbox for chat templates from strangers' GGUF files: safe, bounded in time and size, cancellable.

Jinja's ``ImmutableSandboxedEnvironment`` stops templates from reaching Python internals or mutating data, but not
from working forever: ``{{ 'x' * 50000000 }}``, nested ``range(100000)`` loops or a recursive macro run unbounded on
the inference thread, where Stop cannot reach them. This environment adds a ``RenderBudget`` that every operation a
template can repeat goes through — calls (functions, methods, macros), filters, attribute and item look-ups,
iteration over ``range`` and over the messages — and that raises once the render is over its time or size budget, or
the request was cancelled. Sizes are checked *before* an operation that could allocate a huge string or list.

Hugging Face renders chat templates with Jinja's loop-controls extension (``{% break %}``/``{% continue %}``); so
does this environment.
"""

from __future__ import annotations

import functools
import json
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from jinja2 import nodes
from jinja2.ext import Extension
from jinja2.parser import Parser
from jinja2.sandbox import ImmutableSandboxedEnvironment, safe_range

from fara_desktop.engine.errors import RequestCancelled, TemplateRenderError

MAX_RENDER_SECONDS = 2.0  # real templates render in about a millisecond
MAX_OUTPUT_CHARS = 16 * 1024 * 1024
_CHECK_EVERY = 256  # operations between clock readings: the budget costs nothing measurable per operation


class RenderBudget:
    """Counts a render's operations; raises ``TemplateRenderError`` past its limits, ``RequestCancelled`` when the
    caller's ``should_cancel`` says so."""

    def __init__(
        self,
        seconds: float = MAX_RENDER_SECONDS,
        max_chars: int = MAX_OUTPUT_CHARS,
        should_cancel: Callable[[], bool] | None = None,
    ) -> None:
        self.deadline = time.monotonic() + seconds
        self.seconds = seconds
        self.max_chars = max_chars
        self.should_cancel = should_cancel
        self._ops = 0

    def tick(self) -> None:
        self._ops += 1
        if self._ops % _CHECK_EVERY == 0:
            self.check()

    def check(self) -> None:
        if self.should_cancel is not None and self.should_cancel():
            raise RequestCancelled("Stopped while the prompt was being prepared.")
        if time.monotonic() > self.deadline:
            raise TemplateRenderError(
                f"The model's chat template ran for more than {self.seconds:g} s and was stopped; the template is "
                "broken or hostile. Choose another chat format or model."
            )

    def size(self, count: int) -> None:
        if count > self.max_chars:
            raise TemplateRenderError(
                f"The model's chat template tried to build {count:,} characters (at most {self.max_chars:,} are "
                "allowed) and was stopped; the template is broken or hostile."
            )


class _Unbudgeted(RenderBudget):
    """Outside a render (compiling): sizes are still limited; time is the caller's."""

    def __init__(self) -> None:
        super().__init__(seconds=float("inf"))

    def check(self) -> None: ...


def _tojson(
    value: Any, ensure_ascii: bool = False, indent: int | None = None, separators: Any = None, sort_keys: bool = False
) -> str:
    """Hugging Face's ``tojson``: plain JSON, not HTML-escaped markup (Jinja's own would turn a tool call's quotes
    into ``&#34;`` once joined to text), with the ``ensure_ascii``/``indent`` arguments GLM, Kimi and MiniMax pass.
    A ``map(...)`` result is a generator: it becomes a list, as in llama.cpp's own template engine."""
    if isinstance(value, Iterator):
        value = list(value)
    return json.dumps(value, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def _length(value: Any) -> int:
    return len(value) if isinstance(value, (str, list, tuple, dict, bytes)) else 0


class CheckedList(list):  # type: ignore[type-arg]
    """A list whose iteration ticks the budget at every step (``range(...)`` and the messages). A real list, so
    templates can still slice it, add to it, take its length or serialise it with ``tojson``."""

    def __init__(self, items: Iterable[Any], budget_owner: BoundedSandbox) -> None:
        super().__init__(items)
        self._owner = budget_owner

    def __iter__(self) -> Iterator[Any]:
        for item in super().__iter__():
            self._owner.budget.tick()
            yield item


class GenerationTag(Extension):
    """Hugging Face's ``{% generation %}…{% endgeneration %}`` (Cohere 2, LFM2.5, Laguna …): it marks the
    assistant's text for training masks; for a prompt the body renders unchanged, as in transformers when no
    assistant mask is asked for."""

    tags = {"generation"}  # noqa: RUF012 (jinja2 declares it as a plain attribute)

    def parse(self, parser: Parser) -> list[nodes.Node]:
        next(parser.stream)  # the tag's name
        return parser.parse_statements(("name:endgeneration",), drop_needle=True)


class BoundedSandbox(ImmutableSandboxedEnvironment):
    """The immutable sandbox with loop controls and a budget on everything a template can repeat."""

    intercepted_binops = frozenset({"*", "**", "+"})

    def __init__(self, **options: Any) -> None:
        options.setdefault("extensions", ["jinja2.ext.loopcontrols", GenerationTag])
        options["optimized"] = False  # the optimizer would run filters on constants at compile time, unbudgeted
        super().__init__(**options)
        self.budget: RenderBudget = _Unbudgeted()
        self.globals["range"] = self._range
        self.filters["tojson"] = _tojson
        self.filters = {name: self._bounded_filter(f) for name, f in self.filters.items()}

    def _range(self, *args: Any) -> CheckedList:
        self.budget.tick()
        return CheckedList(safe_range(*args), self)

    def checked(self, items: Iterable[Any]) -> CheckedList:
        return CheckedList(items, self)

    def _check_arguments(self, args: Iterable[Any]) -> None:
        for value in args:
            if isinstance(value, int) and not isinstance(value, bool) and value > self.budget.max_chars:
                self.budget.size(value)  # a width or count this large would allocate that much

    def _bounded_filter(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(fn)  # keeps jinja's pass_context/pass_environment markers
        def bounded(*args: Any, **kwargs: Any) -> Any:
            self.budget.tick()
            self._check_arguments([*args[1:], *kwargs.values()])
            result = fn(*args, **kwargs)
            self.budget.size(_length(result))
            return result

        return bounded

    def call_binop(self, context: Any, operator: str, left: Any, right: Any) -> Any:
        self.budget.tick()
        if operator == "*":
            count = right if isinstance(right, int) else left if isinstance(left, int) else 1
            self.budget.size(max(_length(left), _length(right)) * max(int(count), 0))
        elif operator == "+":
            self.budget.size(_length(left) + _length(right))
        elif operator == "**" and isinstance(right, (int, float)) and abs(right) > 64:
            raise TemplateRenderError("The model's chat template raised a number to a huge power and was stopped.")
        return super().call_binop(context, operator, left, right)

    def is_safe_attribute(self, obj: Any, attr: str, value: Any) -> bool:
        # Kimi K2's templates queue ids with ``list.append``/``pop``, as llama.cpp's own engine allows; the lists a
        # template sees are fresh copies made for each render, and ``call`` bounds their growth.
        if attr in ("append", "pop") and type(obj) is list:
            return True
        return super().is_safe_attribute(obj, attr, value)

    def call(__self, __context: Any, __obj: Any, *args: Any, **kwargs: Any) -> Any:
        if getattr(__obj, "__name__", "") == "append" and type(getattr(__obj, "__self__", None)) is list:
            __self.budget.size(len(__obj.__self__) * 16)  # each entry holds at least a pointer and a small object
        __self.budget.tick()
        __self._check_arguments([*args, *kwargs.values()])
        result = super().call(__context, __obj, *args, **kwargs)
        __self.budget.size(_length(result))
        return result

    def getattr(self, obj: Any, attribute: str) -> Any:
        self.budget.tick()
        return super().getattr(obj, attribute)

    def getitem(self, obj: Any, argument: Any) -> Any:
        self.budget.tick()
        return super().getitem(obj, argument)

    def render_bounded(self, template: Any, budget: RenderBudget, **variables: Any) -> str:
        """Render with ``budget``, streaming the output so its size is checked as it grows."""
        self.budget = budget
        parts: list[str] = []
        total = 0
        try:
            for chunk in template.generate(**variables):
                total += len(chunk)
                budget.size(total)
                budget.tick()
                parts.append(chunk)
        finally:
            self.budget = _Unbudgeted()
        return "".join(parts)
