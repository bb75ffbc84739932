"""The evaluation protocol shared by every method (Tool-Planner, ReAct-like, DFSDT-like): a simulated world built
from a settings object, the decision policy (the offline :class:`~iclr25.tool_planner.llm.HeuristicPolicy` or an
:class:`~iclr25.tool_planner.llm.OpenAICompatibleLLM`), each agent at its knob under one
:class:`~iclr25.tool_planner.planner.Budget`, and the pass rate and costs of a list of episodes.

``settings`` below is any object with the fields they read — the reproduction's ``Config`` is one: the world's
``n_capabilities``, ``variants``, ``n_distractors``, ``failure_mix``, ``p_flaky``, ``p_distractor_error``,
``goal_bank``; the policy's ``policy``, ``llm_model``, ``llm_base_url``, ``llm_timeout``, ``llm_max_retries``; the
budget's ``max_api_calls`` and ``max_replans``.

>>> from iclr25.tool_planner import ToolIndex
>>> from iclr25.tool_planner.config import PRESETS
>>> from iclr25.tool_planner.evaluation import evaluate, simulated_world, summarize
>>> settings = PRESETS["quick"]
>>> env = simulated_world(settings, seed=1)
>>> index = ToolIndex(env.tools)
>>> results, toolkits = evaluate(settings, "tool_planner", 30, env, index, env.make_tasks(40, seed=1), seed=1)
>>> summarize(results)["pass"]
"""

from __future__ import annotations

import warnings

import numpy as np

from .backends import SimulatedToolEnv
from .llm import HeuristicPolicy, OpenAICompatibleLLM
from .planner import Budget, DFSDTAgent, ReActAgent, ToolPlanner
from .toolkits import ToolIndex, build_toolkits

K_ALL = 0  # in k grids: k = N (one API per toolkit)


def k_eff(k: int, n: int) -> int:
    """The number of toolkits a grid value ``k`` gives on a library of ``n`` APIs (``K_ALL``: ``n``; larger
    values are clipped to ``n``)."""
    return n if k == K_ALL else min(k, n)


def simulated_world(settings, seed: int) -> SimulatedToolEnv:
    """The seeded simulated tool library and task generator that ``settings`` describes."""
    return SimulatedToolEnv(
        seed=seed,
        n_capabilities=settings.n_capabilities,
        variants=settings.variants,
        n_distractors=settings.n_distractors,
        failure_mix=settings.failure_mix,
        p_flaky=settings.p_flaky,
        p_distractor_error=settings.p_distractor_error,
        goal_bank=settings.goal_bank,
    )


def make_policy(settings, index: ToolIndex, seed: int, in_toolkit: str = "random"):
    """The decision policy of ``settings.policy``: ``"openai"`` (the server at ``settings.llm_base_url``; key:
    ``OPENAI_API_KEY``) or the offline heuristic (seeded; ``in_toolkit``: ``"random"`` or ``"similarity"``)."""
    if settings.policy == "openai":
        return OpenAICompatibleLLM(  # key: OPENAI_API_KEY
            settings.llm_model,
            settings.llm_base_url,
            timeout=settings.llm_timeout,
            max_retries=settings.llm_max_retries,
            retriever=index,
        )
    return HeuristicPolicy(index, in_toolkit=in_toolkit, seed=seed)


def summarize(results) -> dict:
    """Pass rate (%) and mean costs over a list of EpisodeResult."""
    stops = [r.stopped for r in results]
    return {
        "pass": 100.0 * float(np.mean([r.passed for r in results])),
        "api_calls": float(np.mean([r.api_calls for r in results])),
        "failed_calls": float(np.mean([r.failed_calls for r in results])),
        "llm_calls": float(np.mean([r.llm_calls for r in results])),
        "replans": float(np.mean([r.replans for r in results])),
        "gave_up": 100.0 * float(np.mean([bool(s) for s in stops])),  # % of tasks stopped without an answer
        "wrong_answer": 100.0 * float(np.mean([(not r.passed) and not r.stopped for r in results])),
    }


def make_agent(settings, method, value, policy, backend, index, seed, replans=None):
    """``method`` (``"tool_planner"``: ``value`` = k, toolkits clustered with ``seed``; ``"react"``: APIs per
    step; else DFSDT-like: width) under ``settings.max_api_calls`` API calls and ``replans`` (default
    ``settings.max_replans``) cross-toolkit replans; returns the agent and its toolkits (None for the
    baselines)."""
    budget = Budget(settings.max_api_calls, settings.max_replans if replans is None else replans)
    if method == "tool_planner":
        tk = build_toolkits(index, k_eff(value, len(index.tools)), seed=seed)
        return ToolPlanner(policy, tk, backend, budget), tk
    if method == "react":
        return ReActAgent(policy, backend, budget, attempts=value), None
    return DFSDTAgent(policy, backend, budget, width=value), None


def evaluate(settings, method, value, backend, index, tasks, seed, in_toolkit="random", replans=None):
    """Every task of ``tasks`` by ``method`` at its knob ``value`` (:func:`make_agent`) with a fresh policy
    (:func:`make_policy`); returns the episode results and the toolkits (None for the baselines)."""
    with warnings.catch_warnings():  # k = N on a library with duplicate texts: those APIs share a toolkit
        warnings.filterwarnings("ignore", message="build_toolkits: only")
        agent, tk = make_agent(
            settings,
            method,
            value,
            make_policy(settings, index, seed, in_toolkit),
            backend,
            index,
            seed,
            replans,
        )
    res = [agent.run(t) for t in tasks]
    return res, tk
