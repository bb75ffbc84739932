"""The decision maker behind an agent: plan over toolkits, choose a call, replan, answer (Tool-Planner §3.2–3.3).

Two implementations of one :class:`Policy` protocol:

- :class:`OpenAICompatibleLLM`: any OpenAI-compatible chat server (OpenAI, vLLM, llama.cpp server, Ollama,
  LiteLLM) through the ``openai`` SDK; tool choice and arguments come from ``tools=[...]`` function calling, with
  a JSON-only prompt as fallback when the server has no tool calling.
- :class:`HeuristicPolicy`: the offline similarity policy (NOT a language model): plan = each sub-goal of the
  task mapped to the most similar toolkit; in-toolkit choice = random (the paper's prompt: "randomly select") or
  by similarity; arguments filled by parameter name from bindings, earlier results and the task's inputs;
  answer = the last result's answer field. Every decision counts as one LLM call.
"""

from __future__ import annotations

import json
import os
import re
import zlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from ..common.fields import bounded, check_fields
from .schemas import Tool, parse_arguments
from .tasks import Expr, Ref, Task
from .toolkits import ToolIndex, ToolkitSet

HEURISTIC_LABEL = "heuristic similarity policy (not an LLM)"


class InvalidDecision(Exception):
    """The policy's answer names an API (or toolkit) that is not among those offered (an invented or misspelt
    name). The agent records it as a failed decision and re-asks within its budget; it never substitutes."""

    def __init__(self, name: str, offered: Sequence[str]):
        self.name = name
        super().__init__(
            f"chose {name!r}, not one of the {len(offered)} options offered ({list(offered)[:5]}...)"
        )


class LLMServerError(RuntimeError):
    """The LLM server failed (HTTP 5xx, timeout, connection error) after the client's own retries. The agent
    records the task as failed with this error in its trace and the run goes on."""


@dataclass(frozen=True)
class PlanStep:
    """One node of the plan: a toolkit id and the sub-goal it should solve (``goal`` indexes ``task.goals``
    when the plan follows the task's decomposition, else None)."""

    toolkit: int
    text: str
    goal: int | None = None


@dataclass
class StepRecord:
    """A completed plan step: which sub-goal, which API, with what arguments, and what it returned."""

    goal: int | None
    tool: str
    arguments: dict
    output: dict
    step: int = 0


class Policy(Protocol):
    label: str

    def plan(self, task: Task, toolkits: ToolkitSet) -> list[PlanStep]: ...

    def decompose(self, task: Task) -> list[PlanStep]:
        """The steps of ``task`` for the baselines (no toolkits: ``toolkit=-1``), from what the policy reads."""

    def replan(
        self,
        task: Task,
        toolkits: ToolkitSet,
        plan: list[PlanStep],
        i: int,
        failed: set[int],
        done: list[StepRecord],
        rejected: Sequence[int] = (),
    ) -> list[PlanStep]:
        """A new plan for steps ``i, i+1, …`` given that the toolkits in ``failed`` could not solve step i
        (``rejected``: toolkits this policy already proposed again for step i, refused by the agent)."""

    def select_call(
        self,
        task: Task,
        step: PlanStep,
        candidates: list[Tool],
        tried: list[str],
        done: list[StepRecord],
        mode: str,
    ) -> tuple[Tool, dict]:
        """Choose one of ``candidates`` (untried APIs) and its arguments. ``mode`` is ``"toolkit"`` (inside a
        toolkit, Tool-Planner) or ``"ranked"`` (candidates retrieved by relevance, baselines). A name that is not
        a candidate raises :class:`InvalidDecision`."""

    def rank(self, task: Task, text: str, tools: Sequence[Tool]) -> list[Tool]: ...

    def answer(self, task: Task, done: list[StepRecord]) -> Any: ...


def fill_arguments(task: Task, goal: int | None, tool: Tool, done: list[StepRecord]) -> dict:
    """Arguments for ``tool`` by parameter name: the sub-goal's explicit bindings (literals, a :class:`Ref` to an
    earlier sub-goal's result, or an :class:`Expr` whose references are resolved from earlier results), else —
    unless the goal is ``bound_only`` — the newest earlier result with a field of that name, else the task's
    inputs. Parameters with no value are left out (the call then fails schema validation, as a real one would)."""
    g = task.goals[goal] if goal is not None and goal < len(task.goals) else None
    by_goal = {r.goal: r for r in done}
    args: dict[str, Any] = {}
    for p in tool.param_names:
        if g is not None and p in g.bindings:
            v = g.bindings[p]
            if isinstance(v, Ref):
                r = by_goal.get(v.step)
                if r is not None and v.field in r.output:
                    args[p] = r.output[v.field]
                continue
            if isinstance(v, Expr):
                try:
                    schema = tool.parameters.get("properties", {}).get(p)
                    args[p] = v.resolve({k: r.output for k, r in by_goal.items()}, schema)
                except LookupError:  # a referenced result or field is missing: left out
                    pass
                continue
            args[p] = v
            continue
        if g is not None and g.bound_only:
            continue
        for r in reversed(done):
            if p in r.output:
                args[p] = r.output[p]
                break
        else:
            if p in task.inputs:
                args[p] = task.inputs[p]
    return args


class HeuristicPolicy:
    """Offline stand-in for the LLM (see module docstring). ``in_toolkit``: ``"random"`` (default, the paper's
    wording) or ``"similarity"``. Randomness depends on (seed, task id, step, tried count) only."""

    label = HEURISTIC_LABEL

    def __init__(self, index: ToolIndex, in_toolkit: str = "random", seed: int = 0):
        if in_toolkit not in ("random", "similarity"):
            raise ValueError(f"in_toolkit must be 'random' or 'similarity', got {in_toolkit!r}")
        if not isinstance(index, ToolIndex):
            raise ValueError(f"index must be a ToolIndex over the tool library, got {type(index).__name__}")
        self.index, self.in_toolkit, self.seed = index, in_toolkit, int(seed)

    def _goals(self, task: Task) -> list[str]:
        if not task.goals:
            raise ValueError(
                f"task {task.id!r} has no sub-goals: HeuristicPolicy needs task.goals (an LLM does not)"
            )
        return [g.text for g in task.goals]

    def plan(self, task: Task, toolkits: ToolkitSet) -> list[PlanStep]:
        return [PlanStep(toolkits.rank_toolkits(t)[0], t, i) for i, t in enumerate(self._goals(task))]

    def decompose(self, task: Task) -> list[PlanStep]:
        return [PlanStep(-1, t, i) for i, t in enumerate(self._goals(task))]

    def replan(self, task, toolkits, plan, i, failed, done, rejected=()):
        step = plan[i]
        alt = toolkits.rank_toolkits(step.text, exclude=set(failed))
        if not alt:
            return []
        return [PlanStep(alt[0], step.text, step.goal)] + list(plan[i + 1 :])

    def rank(self, task: Task, text: str, tools: Sequence[Tool]) -> list[Tool]:
        return self.index.rank(text, tools)

    def select_call(self, task, step, candidates, tried, done, mode):
        if not candidates:
            raise ValueError("select_call needs at least one candidate")
        if mode == "toolkit" and self.in_toolkit == "random":
            rng = np.random.default_rng([self.seed, zlib.crc32(task.id.encode()), len(done), len(tried)])
            tool = candidates[int(rng.integers(len(candidates)))]
        elif mode == "toolkit":
            tool = self.index.rank(step.text, candidates)[0]
        else:  # ranked candidates: take the most relevant
            tool = candidates[0]
        return tool, fill_arguments(task, step.goal, tool, done)

    def answer(self, task: Task, done: list[StepRecord]) -> Any:
        for r in reversed(done):
            if task.answer_field in r.output:
                return r.output[task.answer_field]
        return None


# ---------------------------------------------------------------------------------------------------------
_PLAN_SYS = (
    "You are the planner of a tool-using agent. APIs are grouped into toolkits of APIs with similar "
    "functionality. Break the user's request into steps and assign each step the toolkit that can solve it. "
    'Answer with JSON only: a list like [{"toolkit": 3, "goal": "what this step must do"}, ...].'
)
_REPLAN_SYS = (
    "You are the planner of a tool-using agent. A step of the plan failed: every API of its toolkit returned "
    "an error. Completed steps are kept. Plan the remaining steps again, starting with the failed one, using a "
    "different toolkit for it than the failed ones. Answer with JSON only: a list like "
    '[{"toolkit": 3, "goal": "..."}, ...].'
)
_DECOMPOSE_SYS = (
    "You are the planner of a tool-using agent. Break the user's request into the sequence of steps that "
    'each need one API call. Answer with JSON only: a list like ["what step 1 must do", ...].'
)
_CALL_SYS = (
    "You are executing one step of a plan. Call exactly one of the given functions with arguments taken from "
    "the request and from earlier results. If earlier calls in this step failed, choose a different function."
)
_CALL_JSON_SYS = _CALL_SYS + (
    ' Answer with JSON only: {"name": "<function name>", "arguments": {...}}. The functions are:\n'
)
_ANSWER_SYS = "Answer the user's request from the tool results. Reply with the answer only."

TOOLKIT_FORMATS = ("default", "official")


def toolkit_lines(toolkits: ToolkitSet, style: str = "default") -> str:
    """The toolkit list shown to the planner (§3.2: each toolkit's id and description d_j).

    ``style="default"``: one ``[Toolkit i] <description, at most 400 characters>`` line per toolkit, joined by
    newlines. ``style="official"``: the released prompt form, ``[Toolkit i, Desc[<description>]]`` followed
    by a newline for every toolkit, the full description, concatenated."""
    if style not in TOOLKIT_FORMATS:
        raise ValueError(f"style must be one of {TOOLKIT_FORMATS}, got {style!r}")
    if style == "official":
        return "".join(f"[Toolkit {tk.id}, Desc[{tk.description}]]\n" for tk in toolkits.toolkits)
    return "\n".join(f"[Toolkit {tk.id}] {tk.description[:400]}" for tk in toolkits.toolkits)


def _extract_json(text: str) -> Any:
    text = (text or "").strip()
    m = re.search(r"```(?:json)?\s*(.*?)```", text, re.S)
    if m:
        text = m.group(1).strip()
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        m = re.search(r"(\[.*\]|\{.*\})", text, re.S)
        if m:
            return json.loads(m.group(1))
        raise


@dataclass
class OpenAICompatibleLLM:
    """A chat model behind an OpenAI-compatible server. ``retriever`` (a :class:`ToolIndex`) is needed only by
    the retrieval baselines (``rank``). ``use_tools=False`` forces the JSON-prompt fallback; it is also switched
    on automatically when the server rejects ``tools``. ``toolkit_format="official"`` lists the toolkits in the
    released prompt form (see :func:`toolkit_lines`)."""

    model: str
    base_url: str | None = None
    api_key: str | None = field(
        default=None, repr=False
    )  # None: $OPENAI_API_KEY, else "EMPTY" (local servers)
    temperature: float = bounded(0.0, lo=0, hi=2)
    max_tokens: int = 512
    timeout: float = bounded(60.0, lo=0, lo_open=True)
    # the openai SDK's own retries with backoff (5xx, 429, timeouts, connection errors)
    max_retries: int = bounded(2, lo=0)
    use_tools: bool = True
    retriever: ToolIndex | None = None
    client: Any = None
    toolkit_format: str = bounded("default", choices=TOOLKIT_FORMATS)
    label: str = field(default="", init=False)

    def __post_init__(self) -> None:
        check_fields(self)  # the bounds declared above; below: the model name and the client
        if not isinstance(self.model, str) or not self.model:
            raise ValueError(f"model must be a non-empty model name, got {self.model!r}")
        if self.client is None:
            try:
                from openai import OpenAI
            except ImportError:
                raise ImportError("OpenAICompatibleLLM needs `pip install openai` (>= 1.0)") from None
            key = self.api_key or os.environ.get("OPENAI_API_KEY") or "EMPTY"
            self.client = OpenAI(
                base_url=self.base_url, api_key=key, timeout=self.timeout, max_retries=self.max_retries
            )
        self.label = f"LLM {self.model} @ {self.base_url or 'OpenAI'}"

    def _chat(self, messages: list[dict], tools: list[dict] | None = None, passthrough: tuple = ()) -> Any:
        """One chat completion. A server failure left after the SDK's retries becomes :class:`LLMServerError`
        (error classes named in ``passthrough`` are re-raised as they are)."""
        kw: dict[str, Any] = dict(
            model=self.model, messages=messages, temperature=self.temperature, max_tokens=self.max_tokens
        )
        if tools:
            kw.update(tools=tools, tool_choice="required")
        try:
            return self.client.chat.completions.create(**kw).choices[0].message
        except Exception as e:
            if type(e).__name__ in passthrough:
                raise
            if not (_is_sdk_error(e) or isinstance(e, (TimeoutError, ConnectionError))):
                raise  # a bug, not a server failure
            where = self.base_url or "OpenAI"
            raise LLMServerError(f"LLM server {where} failed: {type(e).__name__}: {e}") from e

    def _toolkit_lines(self, toolkits: ToolkitSet) -> str:
        return toolkit_lines(toolkits, self.toolkit_format)

    @staticmethod
    def _parse_plan(content: str, toolkits: ToolkitSet) -> list[PlanStep]:
        try:
            raw = _extract_json(content)
        except (json.JSONDecodeError, TypeError):
            return []
        if isinstance(raw, dict):
            raw = [raw]
        steps = []
        for item in raw if isinstance(raw, list) else []:
            if not isinstance(item, dict):
                continue
            j = item.get("toolkit")
            if j is None:  # the official format {"Toolkit i": "solution"}
                for k, v in item.items():
                    m = re.match(r"\s*toolkit\s*(\d+)", str(k), re.I)
                    if m:
                        j, item = int(m.group(1)), {"goal": v}
                        break
            try:
                j = int(j)
            except (TypeError, ValueError):
                j = -1
            if not 0 <= j < len(toolkits):  # an invented toolkit: a failed decision, never a dropped step
                raise InvalidDecision(
                    f"toolkit {item.get('toolkit', j)}", [f"toolkit {t.id}" for t in toolkits]
                )
            steps.append(PlanStep(j, str(item.get("goal", ""))))
        return steps

    def _done_text(self, done: list[StepRecord]) -> str:
        return (
            "\n".join(f"- {r.tool}({json.dumps(r.arguments)}) -> {json.dumps(r.output)[:300]}" for r in done)
            or "(none)"
        )

    def decompose(self, task: Task) -> list[PlanStep]:
        msg = self._chat(
            [{"role": "system", "content": _DECOMPOSE_SYS}, {"role": "user", "content": task.query}]
        )
        try:
            raw = _extract_json(msg.content or "")
        except (json.JSONDecodeError, TypeError):
            return []
        items = raw if isinstance(raw, list) else []
        texts = [str(x.get("goal", "")) if isinstance(x, dict) else str(x) for x in items]
        return [PlanStep(-1, t) for t in texts if t.strip()]

    def plan(self, task: Task, toolkits: ToolkitSet) -> list[PlanStep]:
        msg = self._chat(
            [
                {"role": "system", "content": _PLAN_SYS + "\n\nToolkits:\n" + self._toolkit_lines(toolkits)},
                {"role": "user", "content": task.query},
            ]
        )
        return self._parse_plan(msg.content, toolkits)

    def replan(self, task, toolkits, plan, i, failed, done, rejected=()):
        user = (
            f"Request: {task.query}\nCompleted steps:\n{self._done_text(done)}\nFailed step: {plan[i].text}\n"
            f"Toolkits that failed for it: {sorted(failed)}"
        )
        if rejected:
            user += (
                f"\nYour previous answer assigned the failed step to toolkit(s) {sorted(set(rejected))} again; "
                "they already failed. Assign it a different toolkit."
            )
        msg = self._chat(
            [
                {
                    "role": "system",
                    "content": _REPLAN_SYS + "\n\nToolkits:\n" + self._toolkit_lines(toolkits),
                },
                {"role": "user", "content": user},
            ]
        )
        # the paper's rule (a different toolkit for the failed step) is enforced by the agent, which re-asks
        return self._parse_plan(msg.content, toolkits)

    def rank(self, task: Task, text: str, tools: Sequence[Tool]) -> list[Tool]:
        if self.retriever is None:
            raise ValueError(
                "OpenAICompatibleLLM.rank needs retriever=ToolIndex(...) (used by the baselines)"
            )
        return self.retriever.rank(text, tools)

    def select_call(self, task, step, candidates, tried, done, mode):
        if not candidates:
            raise ValueError("select_call needs at least one candidate")
        user = (
            f"Request: {task.query}\nCurrent step: {step.text}\nEarlier results:\n{self._done_text(done)}\n"
            f"Functions already tried in this step (failed): {tried or 'none'}"
        )
        by_name = {c.name: c for c in candidates}
        no_tools = ("BadRequestError", "UnprocessableEntityError", "NotFoundError")
        if self.use_tools:
            try:
                msg = self._chat(
                    [{"role": "system", "content": _CALL_SYS}, {"role": "user", "content": user}],
                    tools=[c.to_openai() for c in candidates],
                    passthrough=no_tools,
                )
                calls = getattr(msg, "tool_calls", None) or []
                if calls:
                    fn = calls[0].function
                    try:
                        args = parse_arguments(fn.arguments)
                    except ValueError:
                        args = {}
                    return self._chosen(by_name, fn.name, args)
                return self._chosen(by_name, *self._json_call(msg.content))
            except Exception as e:  # a server without tool calling: switch to the JSON prompt for good
                if type(e).__name__ not in no_tools:
                    raise
                self.use_tools = False
        schemas = json.dumps([c.to_openai()["function"] for c in candidates])
        msg = self._chat(
            [{"role": "system", "content": _CALL_JSON_SYS + schemas}, {"role": "user", "content": user}]
        )
        return self._chosen(by_name, *self._json_call(msg.content))

    @staticmethod
    def _chosen(by_name: dict[str, Tool], name: str, args: dict) -> tuple[Tool, dict]:
        if name not in by_name:  # an invented name is a failed decision, never replaced by a candidate
            raise InvalidDecision(name, list(by_name))
        return by_name[name], args

    @staticmethod
    def _json_call(content: str | None) -> tuple[str, dict]:
        try:
            raw = _extract_json(content or "")
            return str(raw.get("name", "")), parse_arguments(raw.get("arguments", {}))
        except (json.JSONDecodeError, AttributeError, ValueError):
            return "", {}

    def answer(self, task: Task, done: list[StepRecord]) -> Any:
        msg = self._chat(
            [
                {"role": "system", "content": _ANSWER_SYS},
                {"role": "user", "content": f"Request: {task.query}\nTool results:\n{self._done_text(done)}"},
            ]
        )
        return (msg.content or "").strip()


def _is_sdk_error(e: Exception) -> bool:
    """An error raised by the openai SDK (``openai.APIError`` and subclasses: status, timeout, connection)."""
    try:
        import openai
    except ImportError:
        return False
    return isinstance(e, openai.APIError)
