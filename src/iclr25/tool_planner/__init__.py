"""Tool-Planner: Task Planning with Clusters across Multiple Tools (Liu et al., ICLR 2025, arXiv:2406.03807).

https://arxiv.org/abs/2406.03807

APIs are clustered into *toolkits* of functionally similar tools (k-means on embeddings of each API's
functionality text, §3.1); a planner plans over toolkits rather than single APIs (§3.2); when an API fails the
agent re-selects another API of the same toolkit, and when a whole toolkit fails it backtracks and replans
that step with a different toolkit, keeping completed steps (§3.3). This package gives tools as OpenAI
function schemas (with ToolBench and BFCL converters and a loader for the released toolkit-library file),
toolkit construction with scikit-learn (or local sentence-transformers / HF encoders), the planner with exact
budgets and JSONL traces, ReAct-like and DFSDT-like baselines in the same harness, an OpenAI-compatible LLM
backend (vLLM, llama.cpp, Ollama, LiteLLM) and an offline heuristic policy, and tool backends (a seeded
simulated library, the real BFCL API classes, a user's HTTP server), and NESTFUL's real API specs and examples
as tools and tasks with a simulated backend and NESTFUL's sequence metrics (``nestful``).

>>> from iclr25.tool_planner import SimulatedToolEnv, ToolIndex, build_toolkits, HeuristicPolicy, ToolPlanner
>>> env = SimulatedToolEnv(seed=0)
>>> index = ToolIndex(env.tools)
>>> planner = ToolPlanner(HeuristicPolicy(index), build_toolkits(index, k=60), env)
>>> result = planner.run(env.make_tasks(1, seed=0)[0])
"""

from .backends import BFCLToolEnv, HTTPToolBackend, SimulatedToolEnv, ToolBackend, ToolResult
from .library import LibraryEntry, ToolkitLibrary, load_toolkit_library
from .llm import (
    HeuristicPolicy,
    InvalidDecision,
    LLMServerError,
    OpenAICompatibleLLM,
    PlanStep,
    Policy,
    StepRecord,
    fill_arguments,
    toolkit_lines,
)
from .nestful import (
    NestfulSimBackend,
    NestfulTask,
    nestful_task,
    nestful_tasks,
    sequence_f1,
    sequence_scores,
    tools_from_specs,
)
from .planner import Budget, DFSDTAgent, EpisodeResult, ReActAgent, ToolPlanner, write_traces
from .schemas import (
    Tool,
    bfcl_to_openai,
    parse_arguments,
    standardize,
    toolbench_to_openai,
    toolbench_tool_to_openai,
    validate_arguments,
    validate_tool,
)
from .tasks import Expr, Goal, Ref, Task
from .toolkits import (
    Embedder,
    HFPoolingEmbedder,
    SentenceTransformerEmbedder,
    TfidfEmbedder,
    ToolIndex,
    Toolkit,
    ToolkitSet,
    build_toolkits,
    functionality_text,
    kmeans_labels,
    toolkits_from_labels,
)

__all__ = [
    "BFCLToolEnv",
    "Budget",
    "DFSDTAgent",
    "Embedder",
    "EpisodeResult",
    "Expr",
    "Goal",
    "HFPoolingEmbedder",
    "HTTPToolBackend",
    "HeuristicPolicy",
    "InvalidDecision",
    "LLMServerError",
    "LibraryEntry",
    "NestfulSimBackend",
    "NestfulTask",
    "OpenAICompatibleLLM",
    "PlanStep",
    "Policy",
    "ReActAgent",
    "Ref",
    "SentenceTransformerEmbedder",
    "SimulatedToolEnv",
    "StepRecord",
    "Task",
    "TfidfEmbedder",
    "Tool",
    "ToolBackend",
    "ToolIndex",
    "ToolPlanner",
    "ToolResult",
    "Toolkit",
    "ToolkitLibrary",
    "ToolkitSet",
    "bfcl_to_openai",
    "build_toolkits",
    "fill_arguments",
    "functionality_text",
    "kmeans_labels",
    "load_toolkit_library",
    "nestful_task",
    "nestful_tasks",
    "parse_arguments",
    "sequence_f1",
    "sequence_scores",
    "standardize",
    "toolbench_to_openai",
    "toolbench_tool_to_openai",
    "toolkit_lines",
    "toolkits_from_labels",
    "tools_from_specs",
    "validate_arguments",
    "validate_tool",
    "write_traces",
]
