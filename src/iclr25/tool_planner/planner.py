"""Tool-Planner's solution tree over toolkits (§3.2–3.3, Algorithm 1) and the ReAct / DFSDT baselines.

Tool-Planner executes a plan whose nodes are toolkits. When an API fails, the next API is drawn from the *same*
toolkit (in-toolkit reselection, cheap: its members are interchangeable). When every API of the toolkit has
failed, the agent goes back one node and asks the planner to revise the step with a *different* toolkit
(cross-toolkit replanning); completed steps are kept and never re-executed. The released code's replanning is a
no-op (it re-reads a cached plan); here it is the paper's.

All agents share one :class:`_Episode` accountant: a call reaches the backend only within the budget of API
calls, every call is counted (failed ones too), every policy decision counts as an LLM call, and every event goes
into the episode's trace.

Decisions are never repaired silently: an API name that was not offered, or a replan that gives the failed step a
toolkit that already failed for it, is a failed decision — recorded, re-asked at most ``Budget.max_reasks`` times
(each re-ask is an LLM call), then the step fails. A task passes only when every step of its (final) plan
completed and the answer is right. An LLM server failure (after the client's retries) fails the task with the
error in its trace; the next task runs.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ..common.fields import bounded, check_fields
from ..common.io import atomic_write_text
from .backends import ToolBackend, ToolResult
from .llm import InvalidDecision, LLMServerError, PlanStep, Policy, StepRecord
from .schemas import Tool, validate_arguments
from .tasks import Task
from .toolkits import ToolkitSet


@dataclass(frozen=True)
class Budget:
    """Per-task limits: API calls (failed ones count), cross-toolkit replans, LLM decisions (None: unlimited),
    and re-asks after one failed decision (an invented API name, a replan that repeats a failed toolkit)."""

    max_api_calls: int = bounded(15, lo=0)
    max_replans: int = bounded(3, lo=0)
    max_llm_calls: int | None = bounded(None, kind=int, lo=1, optional=True)
    max_reasks: int = bounded(2, lo=0)

    def __post_init__(self) -> None:
        check_fields(self)  # the bounds declared above


class OutOfBudget(Exception):
    pass


class StepFailed(Exception):
    """A step cannot be completed (its decisions stayed invalid after the re-asks)."""


@dataclass
class EpisodeResult:
    """Outcome of one task: the answer, whether it is right, and the exact cost."""

    task_id: str
    method: str
    answer: Any
    passed: bool
    api_calls: int
    failed_calls: int
    replans: int
    llm_calls: int
    stopped: str = ""  # why the agent gave up ("" when it answered)
    invalid_decisions: int = 0  # invented API names / repeated failed toolkits (each re-asked or fatal)
    steps_planned: int = 0
    steps_done: int = 0
    trace: list[dict] = field(default_factory=list)
    # the executed call sequence the answer rests on: the successful calls of the final path, in order, as
    # {"tool", "arguments"} (DFSDT: backtracked calls are not in it; a stopped episode: its path when it stopped)
    calls: list[dict] = field(default_factory=list)

    def summary(self) -> dict:
        d = asdict(self)
        d.pop("trace")
        return d


class _Episode:
    def __init__(self, backend: ToolBackend, budget: Budget, task: Task, method: str):
        self.backend, self.budget, self.task, self.method = backend, budget, task, method
        self.api_calls = self.failed_calls = self.replans = self.llm_calls = self.invalid = 0
        self.steps_planned = self.steps_done = 0
        self.trace: list[dict] = []
        self.sequence: list[StepRecord] = []  # the current path's completed calls (set by the agents)
        self._tools = {t.name: t for t in backend.tools}
        backend.reset(task.id)

    def llm(self, what: str) -> None:
        if self.budget.max_llm_calls is not None and self.llm_calls >= self.budget.max_llm_calls:
            raise OutOfBudget(f"LLM-call budget ({self.budget.max_llm_calls}) spent")
        self.llm_calls += 1

    def event(self, kind: str, **kw: Any) -> None:
        self.trace.append({"event": kind, **kw})

    def call(self, tool: Tool, args: dict, step: int) -> ToolResult:
        if self.api_calls >= self.budget.max_api_calls:
            raise OutOfBudget(f"API-call budget ({self.budget.max_api_calls}) spent")
        self.api_calls += 1
        errs = validate_arguments(tool, args)
        if errs:
            res = ToolResult(False, error="arguments do not match the schema: " + "; ".join(errs))
        else:
            try:
                res = self.backend.call(tool.name, dict(args))
                if not isinstance(res, ToolResult):
                    res = ToolResult(False, error=f"backend returned {type(res).__name__}, not ToolResult")
            except Exception as e:  # a backend that raises or times out is a failed call, never a crashed run
                res = ToolResult(False, error=f"{type(e).__name__}: {e}")
        self.failed_calls += not res.ok
        self.event(
            "call", step=step, tool=tool.name, arguments=args, ok=res.ok, output=res.output, error=res.error
        )
        return res

    def choose(
        self, policy: Policy, step: PlanStep, cands: list[Tool], tried: list[str], done, mode: str, i: int
    ):
        """One API choice; an API that was not offered (invented, already tried, outside the toolkit) is a failed
        decision: recorded and re-asked up to ``max_reasks`` times, then :class:`StepFailed`."""
        offered = {t.name for t in cands}
        for attempt in range(self.budget.max_reasks + 1):
            self.llm("select")
            try:
                tool, args = policy.select_call(self.task, step, cands, tried, done, mode)
                if not isinstance(tool, Tool) or tool.name not in offered:
                    raise InvalidDecision(getattr(tool, "name", repr(tool)), sorted(offered))
                return tool, args
            except InvalidDecision as e:
                self.invalid += 1
                self.event("invalid_decision", step=i, decision="select", chosen=e.name, attempt=attempt)
        raise StepFailed(f"step {i}: no offered API chosen in {self.budget.max_reasks + 1} decisions")

    def finish(self, answer: Any, stopped: str = "") -> EpisodeResult:
        complete = self.steps_planned > 0 and self.steps_done >= self.steps_planned
        passed = (not stopped) and complete and self.task.check(answer)
        self.event(
            "answer",
            answer=answer,
            passed=passed,
            stopped=stopped,
            steps_done=self.steps_done,
            steps_planned=self.steps_planned,
        )
        return EpisodeResult(
            self.task.id,
            self.method,
            answer,
            passed,
            self.api_calls,
            self.failed_calls,
            self.replans,
            self.llm_calls,
            stopped,
            self.invalid,
            self.steps_planned,
            self.steps_done,
            self.trace,
            [{"tool": r.tool, "arguments": dict(r.arguments)} for r in self.sequence],
        )

    def fail(self, e: Exception) -> EpisodeResult:
        """The task ends without an answer because of ``e`` (budget, failed step, LLM server error)."""
        if isinstance(e, LLMServerError):
            self.event("error", error=str(e))
            return self.finish(None, f"LLM server error: {e}")
        return self.finish(None, str(e))


_ENDS = (OutOfBudget, StepFailed, LLMServerError)


class ToolPlanner:
    """Tool-Planner (Algorithm 1): plan over ``toolkits``; in-toolkit reselection; cross-toolkit replanning.

    >>> planner = ToolPlanner(policy, toolkits, backend, Budget(max_api_calls=15, max_replans=3))
    >>> result = planner.run(task)            # EpisodeResult: answer, passed, api_calls, replans, trace
    """

    method = "tool_planner"

    def __init__(
        self, policy: Policy, toolkits: ToolkitSet, backend: ToolBackend, budget: Budget | None = None
    ):
        if not isinstance(toolkits, ToolkitSet):
            raise ValueError(
                f"toolkits must be a ToolkitSet (from build_toolkits), got {type(toolkits).__name__}"
            )
        known = {t.name for t in backend.tools}
        missing = [n for n in toolkits.assignment if n not in known]
        if missing:
            raise ValueError(f"toolkits contain APIs the backend does not offer: {missing[:5]}")
        self.policy, self.toolkits, self.backend = policy, toolkits, backend
        self.budget = budget or Budget()

    def run(self, task: Task) -> EpisodeResult:
        ep = _Episode(self.backend, self.budget, task, self.method)
        done: list[StepRecord] = []
        ep.sequence = done
        try:
            plan = self._plan(ep, task)
            ep.event("plan", steps=[[s.toolkit, s.text] for s in plan])
            ep.steps_planned = len(plan)
            if not plan:
                return ep.finish(None, "empty plan")
            failed: dict[int, set[int]] = defaultdict(set)
            i = 0
            while i < len(plan):
                step = plan[i]
                members = self.toolkits[step.toolkit].tools
                tried: list[str] = []
                solved = False
                while len(tried) < len(members):  # in-toolkit reselection
                    cands = [t for t in members if t.name not in tried]
                    tool, args = ep.choose(self.policy, step, cands, tried, done, "toolkit", i)
                    res = ep.call(tool, args, i)
                    tried.append(tool.name)
                    if res.ok:
                        done.append(StepRecord(step.goal, tool.name, dict(args), dict(res.output or {}), i))
                        solved = True
                        break
                if solved:
                    i += 1
                    ep.steps_done = i
                    continue
                failed[i].add(step.toolkit)  # cross-toolkit: back to the parent node, revise this step
                if ep.replans >= self.budget.max_replans:
                    return ep.finish(None, f"replan budget ({self.budget.max_replans}) spent")
                ep.replans += 1
                new = self._replan(ep, task, plan, i, failed[i], done)
                plan = plan[:i] + new
                ep.steps_planned = len(plan)
            ep.llm("answer")
            return ep.finish(self.policy.answer(task, done))
        except _ENDS as e:
            return ep.fail(e)

    def _steps_ok(self, steps: list[PlanStep]) -> list[PlanStep]:
        bad = [s.toolkit for s in steps if not 0 <= s.toolkit < len(self.toolkits)]
        if bad:
            raise InvalidDecision(f"toolkit {bad[0]}", [f"toolkit {t.id}" for t in self.toolkits.toolkits])
        return steps

    def _plan(self, ep: _Episode, task: Task) -> list[PlanStep]:
        """The plan over toolkits (§3.2); one naming a toolkit that does not exist is re-asked (bounded)."""
        for attempt in range(self.budget.max_reasks + 1):
            ep.llm("plan")
            try:
                return self._steps_ok(list(self.policy.plan(task, self.toolkits)))
            except InvalidDecision as e:
                ep.invalid += 1
                ep.event("invalid_decision", step=0, decision="plan", chosen=e.name, attempt=attempt)
        raise StepFailed(f"no plan over existing toolkits in {self.budget.max_reasks + 1} decisions")

    def _replan(self, ep: _Episode, task: Task, plan, i: int, failed: set[int], done) -> list[PlanStep]:
        """Revise steps i, i+1, … (§3.3). The failed step must get a toolkit that has not failed for it: a
        replan that repeats one is re-asked (naming it) up to ``max_reasks`` times, then the step fails."""
        rejected: list[int] = []
        for attempt in range(self.budget.max_reasks + 1):
            ep.llm("replan")
            kw = {"rejected": tuple(rejected)} if rejected else {}  # older policies take no `rejected`
            try:
                new = self._steps_ok(
                    list(self.policy.replan(task, self.toolkits, plan, i, set(failed), done, **kw))
                )
            except InvalidDecision as e:
                ep.invalid += 1
                ep.event("invalid_decision", step=i, decision="replan", chosen=e.name, attempt=attempt)
                continue
            ep.event("replan", step=i, failed=sorted(failed), steps=[[s.toolkit, s.text] for s in new])
            if not new:
                raise StepFailed(f"step {i}: no toolkit left for a failed step")
            if new[0].toolkit not in failed:
                return new
            ep.invalid += 1
            rejected.append(new[0].toolkit)
            ep.event("invalid_decision", step=i, decision="replan", chosen=new[0].toolkit, attempt=attempt)
        raise StepFailed(
            f"step {i}: every replan kept a failed toolkit ({sorted(set(rejected))}) or named none that exists"
        )


def _steps(ep: _Episode, policy: Policy, task: Task) -> list[PlanStep]:
    """The baselines' steps, decomposed by the policy from what it reads (an LLM: the query alone); one LLM
    decision, like Tool-Planner's plan."""
    ep.llm("plan")
    steps = list(policy.decompose(task))
    ep.event("plan", steps=[[-1, s.text] for s in steps])
    ep.steps_planned = len(steps)
    if not steps:
        raise StepFailed("empty plan")
    return steps


class ReActAgent:
    """ReAct-like baseline: one chain; per sub-goal the most relevant API of the whole library (retrieval over
    all APIs), on failure the next one, at most ``attempts`` APIs per step, no backtracking."""

    method = "react"

    def __init__(self, policy: Policy, backend: ToolBackend, budget: Budget | None = None, attempts: int = 2):
        if isinstance(attempts, bool) or not isinstance(attempts, int) or attempts < 1:
            raise ValueError(f"attempts must be an int >= 1, got {attempts!r}")
        self.policy, self.backend, self.budget, self.attempts = policy, backend, budget or Budget(), attempts

    def run(self, task: Task) -> EpisodeResult:
        ep = _Episode(self.backend, self.budget, task, self.method)
        done: list[StepRecord] = []
        ep.sequence = done
        try:
            for gi, step in enumerate(_steps(ep, self.policy, task)):
                ranked = self.policy.rank(task, step.text, self.backend.tools)[: self.attempts]
                tried: list[str] = []
                for _ in range(len(ranked)):
                    cands = [t for t in ranked if t.name not in tried]
                    tool, args = ep.choose(self.policy, step, cands, tried, done, "ranked", gi)
                    res = ep.call(tool, args, gi)
                    tried.append(tool.name)
                    if res.ok:
                        done.append(StepRecord(step.goal, tool.name, dict(args), dict(res.output or {}), gi))
                        ep.steps_done = gi + 1
                        break
                else:
                    return ep.finish(None, f"step {gi} failed after {len(ranked)} APIs")
            ep.llm("answer")
            return ep.finish(self.policy.answer(task, done))
        except _ENDS as e:
            return ep.fail(e)


class DFSDTAgent:
    """DFSDT-like baseline (ToolLLM's depth-first search-based decision tree): each node expands the ``width``
    most relevant APIs for its sub-goal; a failed child moves to the next sibling; a node whose children all
    fail backtracks to its parent, which tries its next sibling (a different API for the previous step)."""

    method = "dfsdt"

    def __init__(self, policy: Policy, backend: ToolBackend, budget: Budget | None = None, width: int = 3):
        if isinstance(width, bool) or not isinstance(width, int) or width < 1:
            raise ValueError(f"width must be an int >= 1, got {width!r}")
        self.policy, self.backend, self.budget, self.width = policy, backend, budget or Budget(), width

    def run(self, task: Task) -> EpisodeResult:
        ep = _Episode(self.backend, self.budget, task, self.method)

        def dfs(gi: int, done: list[StepRecord]) -> list[StepRecord] | None:
            if gi == len(steps):
                return done
            step = steps[gi]
            tried: list[str] = []
            for _ in range(len(ranked[gi])):
                cands = [t for t in ranked[gi] if t.name not in tried]
                tool, args = ep.choose(self.policy, step, cands, tried, done, "ranked", gi)
                res = ep.call(tool, args, gi)
                tried.append(tool.name)
                if res.ok:
                    rec = StepRecord(step.goal, tool.name, dict(args), dict(res.output or {}), gi)
                    ep.sequence = done + [rec]
                    out = dfs(gi + 1, done + [rec])
                    if out is not None:
                        return out
                    ep.sequence = done
                    ep.event("backtrack", to_step=gi)
            return None

        try:
            steps = _steps(ep, self.policy, task)
            ranked = [self.policy.rank(task, s.text, self.backend.tools)[: self.width] for s in steps]
            path = dfs(0, [])
            if path is None:
                return ep.finish(None, "search tree exhausted")
            ep.steps_done = len(steps)
            ep.llm("answer")
            return ep.finish(self.policy.answer(task, path))
        except _ENDS as e:
            return ep.fail(e)


def write_traces(results: Sequence[EpisodeResult], path: str | Path) -> Path:
    """All episodes' traces as JSON lines (one line per event, tagged with task and method), written atomically."""
    lines = []
    for r in results:
        for ev in r.trace:
            lines.append(json.dumps({"task": r.task_id, "method": r.method, **ev}, default=str))
    atomic_write_text(Path(path), "\n".join(lines) + ("\n" if lines else ""))
    return Path(path)
