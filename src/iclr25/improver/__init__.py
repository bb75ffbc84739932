"""ImProver — Agent-Based Automated Proof Optimization (ICLR 2025).

Ahuja, Avigad, Tetali, Welleck; arXiv 2410.04753 (https://arxiv.org/abs/2410.04753).

ImProver rewrites a formal proof that already checks so that it optimises a user metric — fewer steps
(*length*) or more explicit ``have`` statements (*declarativity*) — while the statement stays fixed and the
proof keeps checking. An LLM agent is given the proof with the goal state after every step (Chain-of-States),
retrieved examples and the error messages of its previous attempt; it samples best-of-n candidates, refines
them for m rounds, and keeps the best correct proof seen (so a correct input never comes back broken).

The agent here is backend-independent: a :class:`ProofChecker` (the shipped pure-Python
:class:`ToyTacticChecker`, or :class:`LeanReplChecker` over the Lean REPL) and a :class:`ProofGenerator`
(:class:`OpenAICompatibleGenerator` for vLLM / llama.cpp / Ollama / OpenAI, :class:`TinyLMGenerator` trained
offline on the toy language, :class:`ScriptedRewriter` as a test double).

Public API::

    from iclr25.improver import ImProver, Theorem, ToyTacticChecker, OpenAICompatibleGenerator
    agent = ImProver(ToyTacticChecker(), OpenAICompatibleGenerator("my-model"), metric="length")
    result = agent.improve(Theorem("theorem t (p q : Prop) (hp : p) (hq : q) : p ∧ q", "constructor\\n· exact hp\\n· exact hq"))
    print(result.output.proof, result.delta)
"""

from .agent import (
    Attempt,
    Candidate,
    Improvement,
    ImProver,
    ImProverConfig,
    ProofGenerator,
    StatementChanged,
    Theorem,
    attempt_record,
    best_of_n,
    build_prompt,
    clean_candidate,
    keep_best_update,
)
from .chain_of_states import render_chain_of_states, strip_chain_of_states
from .checker import CheckResult, LeanReplChecker, LeanReplError, Message, ProofChecker, Step, check_many
from .generators import OpenAICompatibleGenerator, ScriptedRewriter, TinyLMGenerator, scripted_edits
from .lean_file import parse_lean_theorems, read_lean_theorems
from .metrics import (
    DECLARATIVITY,
    LENGTH,
    Metric,
    aggregate,
    aggregate_csv,
    declarativity,
    get_metric,
    length,
)
from .retrieval import ExampleRetriever, mmr
from .toy import ToySyntaxError, ToyTacticChecker, parse_formula, parse_proof
from .toy_theorems import make_benchmark, rewrite_pairs

__all__ = [
    "DECLARATIVITY",
    "LENGTH",
    "Attempt",
    "Candidate",
    "CheckResult",
    "ExampleRetriever",
    "ImProver",
    "ImProverConfig",
    "Improvement",
    "LeanReplChecker",
    "LeanReplError",
    "Message",
    "Metric",
    "OpenAICompatibleGenerator",
    "ProofChecker",
    "ProofGenerator",
    "ScriptedRewriter",
    "StatementChanged",
    "Step",
    "Theorem",
    "TinyLMGenerator",
    "ToySyntaxError",
    "ToyTacticChecker",
    "aggregate",
    "aggregate_csv",
    "attempt_record",
    "best_of_n",
    "build_prompt",
    "check_many",
    "clean_candidate",
    "declarativity",
    "get_metric",
    "keep_best_update",
    "length",
    "make_benchmark",
    "mmr",
    "parse_formula",
    "parse_lean_theorems",
    "parse_proof",
    "read_lean_theorems",
    "render_chain_of_states",
    "rewrite_pairs",
    "scripted_edits",
    "strip_chain_of_states",
]
