"""The ImProver agent (Ahuja et al., ICLR 2025, §3): prompt assembly, best-of-n, refinement, keep-best.

One call of the generator sees (in this order) the metric's system prompt, a fixed instruction, retrieved
examples, the file context, the records of the last ``prev_k`` attempts (input, output, correctness, every
error message with its source line, score, δ and the direction) and the current theorem — with the goal
state after each step inlined as comments when Chain-of-States is on. The model returns only the tactic
block; it is re-attached to the original declaration, so the statement can never change (a candidate that
restates a different theorem is rejected).

Sampling combinators (§3.3)::

    best_of_n(n):      n samples of one prompt, checked; the metric-best correct one (ties: the earliest);
                       when none is correct, the first sample (official code; ``on_none="fewest_errors"``
                       gives the paper's formula).
    refinement(m):     m rounds; round i prompts with the current proof and the last prev_k attempt records;
                       keep-best replaces the state only by a correct candidate that scores strictly better
                       (a correct state is never traded for a broken one).

ImProver = ``refinement(best_of_n(3), m=5, prev_k=1, keep_best=True)`` with CoS, error history and 10
retrieved examples (15 generations per theorem); the paper's baseline = one sample, no CoS, no examples.
All theorems advance round by round in lockstep, so a generator with ``generate_batch`` (a local LM, a
vLLM server) receives every prompt of a round at once.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Protocol, runtime_checkable

from ..common.checks import need_bool, need_str, need_type
from ..common.fields import bounded, check_fields
from .chain_of_states import render_chain_of_states, strip_chain_of_states
from .checker import CheckResult, ProofChecker, check_many
from .metrics import Metric, get_metric
from .retrieval import ExampleRetriever

ON_NONE = ("first", "fewest_errors")

INSTRUCTION = (
    "You rewrite the proof of the theorem in <CURRENT> to optimise the metric described above. The file "
    "context is in <FILE_CONTEXT>; previous attempts are in <PREV I=k> blocks with their error messages. "
    "Return only the proof, starting at the first tactic, without the theorem statement. Keep the theorem "
    "statement unchanged."
)
COS_INSTRUCTION = "The goal state after each tactic is given as a comment /- ... -/ below the tactic."


@runtime_checkable
class ProofGenerator(Protocol):
    """``generate(messages, n)``: ``n`` completions (proof texts) for one chat prompt."""

    def generate(self, messages: list[dict], n: int) -> list[str]: ...


@dataclass(frozen=True)
class Theorem:
    """A theorem to optimise: file context, the declaration (statement) and its current proof (tactics)."""

    decl: str = bounded(kind=str)
    proof: str = bounded(kind=str)
    context: str = bounded("")
    name: str = bounded("")

    def __post_init__(self) -> None:
        check_fields(self)  # the types declared above; below: a non-empty declaration
        if not self.decl.strip():
            raise ValueError("decl must be a non-empty declaration, got ''")


@dataclass(frozen=True)
class ImProverConfig:
    """Agent settings; defaults are the paper's ImProver (``benchmark/tools.py::improver``)."""

    n: int = bounded(3, lo=1)  # best-of-n samples per round
    m: int = bounded(5, lo=1)  # refinement rounds
    prev_k: int = bounded(1, lo=0)  # attempt records shown to the model
    keep_best: bool = bounded(True)
    chain_of_states: bool = bounded(True)
    error_history: bool = bounded(True)
    examples: int = bounded(10, lo=0)  # retrieved in-context examples (0 = none)
    lock_refinement_state: bool = bounded(False)  # always refine the original proof
    on_none: str = bounded("first", choices=ON_NONE)  # best-of-n with no correct sample

    def __post_init__(self) -> None:
        check_fields(self)  # the bounds declared above

    @classmethod
    def baseline(cls) -> ImProverConfig:
        """The paper's single-shot baseline: one sample, no CoS, no history, no examples."""
        return cls(
            n=1, m=1, prev_k=0, keep_best=False, chain_of_states=False, error_history=False, examples=0
        )

    @property
    def generations(self) -> int:
        return self.n * self.m


@dataclass(frozen=True)
class Candidate:
    proof: str
    result: CheckResult
    score: float | None  # None when not correct

    @property
    def correct(self) -> bool:
        return self.result.correct


@dataclass(frozen=True)
class Attempt:
    """One refinement round's record, shown to the model as ``<PREV>`` (§3.3)."""

    input: str
    output: str
    correct: bool
    messages: tuple[tuple[int, str, str], ...]  # (line, source line, text) of each error
    score: float | None
    delta: float | None


@dataclass
class Improvement:
    """The outcome for one theorem."""

    theorem: Theorem
    original: Candidate
    output: Candidate
    attempts: list[Attempt] = field(default_factory=list)
    generations: int = 0

    @property
    def delta(self) -> float | None:
        o, n = self.original, self.output
        if not (o.correct and n.correct) or o.score is None or n.score is None or o.score == 0:
            return None
        return (n.score - o.score) / o.score

    def row(self) -> dict:
        """A result row in the official CSV layout (input of :func:`~iclr25.improver.metrics.aggregate`)."""
        return {
            "decl": self.theorem.decl,
            "og_correct": self.original.correct,
            "og_score": self.original.score,
            "new_correct": self.output.correct,
            "new_score": self.output.score,
            "og_raw": self.original.proof,
            "new_raw": self.output.proof,
        }


class StatementChanged(ValueError):
    """A generator output that restates a different theorem."""


_FENCE = re.compile(r"```[A-Za-z0-9_-]*\n(.*?)```", re.S)
_DECL_HEAD = re.compile(r"^\s*(theorem|lemma|example)\b")


def _need_metric(metric) -> None:
    if not isinstance(metric, Metric):
        raise ValueError(f"metric must be a Metric (see get_metric), got {metric!r:.80}")


def _norm(s: str) -> str:
    return re.sub(r"\s+", " ", s).strip()


def clean_candidate(text: str, decl: str) -> str:
    """Extract the tactic block from a model output (code fences, CoS comments, a restated header).

    A header that restates ``decl`` (up to whitespace) is dropped; a header with a different statement
    raises :class:`StatementChanged` — the statement is immutable.
    """
    if not isinstance(text, str):
        raise ValueError(f"generator output must be a str, got {type(text).__name__}")
    need_str("decl", decl)
    m = _FENCE.search(text)
    if m:
        text = m.group(1)
    text = strip_chain_of_states(text.replace("\r\n", "\n"))
    lines = text.split("\n")
    first = next((i for i, ln in enumerate(lines) if ln.strip()), None)
    if first is not None and _DECL_HEAD.match(lines[first]):
        joined = "\n".join(lines[first:])
        k = joined.find(":= by")
        if k < 0:
            raise StatementChanged("output starts a declaration without ':= by'")
        if _norm(joined[:k]) != _norm(decl.replace(":= by", "")):
            raise StatementChanged(f"output restates a different theorem: {_norm(joined[:k])[:120]!r}")
        rest = joined[k + len(":= by") :]
        lines = rest.split("\n")
        if lines and not lines[0].strip():
            lines = lines[1:]
        else:
            lines[0] = lines[0].strip()
    else:
        lines = lines[first:] if first is not None else []
    body = [ln.rstrip() for ln in lines]
    while body and not body[-1].strip():
        body.pop()
    ind = min((len(ln) - len(ln.lstrip(" ")) for ln in body if ln.strip()), default=0)
    return "\n".join(ln[ind:] for ln in body)


def best_of_n(cands: Sequence[Candidate], metric: Metric, on_none: str = "first") -> Candidate:
    """The metric-best correct candidate (the earliest among ties); if none is correct, the first one
    (``on_none="first"``, official code) or the one with the fewest errors (``"fewest_errors"``)."""
    _need_metric(metric)
    if isinstance(cands, (str, bytes)) or not isinstance(cands, Sequence) or not cands:
        raise ValueError(f"cands must be a non-empty sequence of Candidate, got {cands!r:.80}")
    for i, c in enumerate(cands):
        need_type(f"cands[{i}]", c, Candidate)
    if on_none not in ON_NONE:
        raise ValueError(f"on_none must be one of {ON_NONE}, got {on_none!r}")
    best = None
    for c in cands:
        if c.correct and (best is None or metric.better(c.score, best.score)):
            best = c
    if best is not None:
        return best
    if on_none == "first":
        return cands[0]
    return min(cands, key=lambda c: len(c.result.errors))  # min keeps the earliest on ties


def keep_best_update(state: Candidate, cand: Candidate, metric: Metric, keep_best: bool = True) -> Candidate:
    """Refinement's state update (§3.3): without keep-best the new candidate always replaces the state;
    with it a correct state is only replaced by a strictly better correct candidate."""
    need_type("state", state, Candidate)
    need_type("cand", cand, Candidate)
    _need_metric(metric)
    need_bool("keep_best", keep_best)
    if not keep_best:
        return cand
    if state.correct and cand.correct:  # metric.cmp(state, cand): ties keep the state
        return cand if metric.better(cand.score, state.score) else state
    if state.correct and not cand.correct:
        return state
    return cand


def attempt_record(inp: Candidate, out: Candidate, metric: Metric) -> Attempt:
    need_type("inp", inp, Candidate)
    need_type("out", out, Candidate)
    _need_metric(metric)
    src = out.proof.split("\n")
    msgs = tuple(
        (m.line, src[m.line - 1] if 1 <= m.line <= len(src) else "", m.text) for m in out.result.errors
    )
    delta = None
    if inp.correct and out.correct and inp.score:
        delta = metric.delta(inp.score, out.score)
    return Attempt(inp.proof, out.proof, out.correct, msgs, out.score, delta)


def render_attempt(k: int, a: Attempt, metric: Metric) -> str:
    lines = [f"<PREV I={k}>", "INPUT:", a.input, "OUTPUT:", a.output, f"CORRECT: {a.correct}"]
    for line, src, text in a.messages:
        lines.append(f"ERROR at line {line} ({src.strip()!r}): {text}")
    if a.correct:
        better = "bigger" if metric.direction == "max" else "smaller"
        d = "undefined" if a.delta is None else f"{a.delta:+.3f}"
        lines.append(f"METRIC SCORE: {a.score:g} (delta {d}; {better} is better)")
    lines.append(f"</PREV I={k}>")
    return "\n".join(lines)


def build_prompt(
    theorem: Theorem,
    current: Candidate,
    metric: Metric,
    cfg: ImProverConfig,
    history: Sequence[Attempt] = (),
    examples: Sequence[tuple[str, str]] = (),
) -> list[dict]:
    """The chat messages of one generation call (§3.2–3.3)."""
    need_type("theorem", theorem, Theorem)
    need_type("current", current, Candidate)
    _need_metric(metric)
    need_type("cfg", cfg, ImProverConfig)
    for i, a in enumerate(history):
        need_type(f"history[{i}]", a, Attempt)
    for i, p in enumerate(examples):
        if not (isinstance(p, (tuple, list)) and len(p) == 2 and all(isinstance(x, str) for x in p)):
            raise ValueError(f"examples[{i}] must be an (input, output) pair of str, got {p!r:.80}")
    system = [metric.system_prompt, INSTRUCTION] + ([COS_INSTRUCTION] if cfg.chain_of_states else [])
    msgs = [{"role": "system", "content": "\n".join(s for s in system if s)}]
    for a, b in examples:
        msgs.append({"role": "system", "content": f"<EXAMPLE>\nINPUT:\n{a}\nOUTPUT:\n{b}\n</EXAMPLE>"})
    if theorem.context.strip():
        msgs.append({"role": "user", "content": f"<FILE_CONTEXT>\n{theorem.context}\n</FILE_CONTEXT>"})
    if cfg.error_history and cfg.prev_k > 0:
        for k, a in enumerate(list(history)[-cfg.prev_k :]):
            msgs.append({"role": "user", "content": render_attempt(k, a, metric)})
    proof = render_chain_of_states(current.proof, current.result) if cfg.chain_of_states else current.proof
    user = f"{metric.user_prompt}\n<CURRENT>\n{theorem.decl.strip()} := by\n{proof}\n</CURRENT>"
    msgs.append({"role": "user", "content": user})
    return msgs


def current_block(messages: Sequence[dict]) -> tuple[str, str]:
    """(declaration, proof text) inside the last ``<CURRENT>`` block of a prompt (for local generators)."""
    if (
        isinstance(messages, (str, bytes))
        or not isinstance(messages, Sequence)
        or not messages
        or not all(isinstance(x, dict) and isinstance(x.get("content"), str) for x in messages)
    ):
        raise ValueError(
            f"messages must be a non-empty list of chat dicts with 'content', got {messages!r:.80}"
        )
    text = messages[-1]["content"]
    m = re.search(r"<CURRENT>\n(.*?) := by\n(.*?)\n</CURRENT>", text, re.S)
    if m is None:
        raise ValueError("messages hold no <CURRENT> block")
    return m.group(1), m.group(2)


def last_errors(messages: Sequence[dict]) -> list[str]:
    """The ``ERROR at line …`` lines of the latest ``<PREV>`` block (empty without error history)."""
    prev = [m["content"] for m in messages if m["content"].startswith("<PREV")]
    return [ln for ln in prev[-1].split("\n") if ln.startswith("ERROR")] if prev else []


class ImProver:
    """The agent: ``improve(theorem)`` / ``improve_all(theorems)`` return :class:`Improvement` objects."""

    def __init__(
        self,
        checker: ProofChecker,
        generator: ProofGenerator,
        metric: Metric | str = "length",
        config: ImProverConfig | None = None,
        retriever: ExampleRetriever | None = None,
    ):
        if not isinstance(checker, ProofChecker):
            raise ValueError(f"checker must implement check(context, decl, proof), got {checker!r}")
        if not isinstance(generator, ProofGenerator):
            raise ValueError(f"generator must implement generate(messages, n), got {generator!r}")
        if config is not None:
            need_type("config", config, ImProverConfig)
        if retriever is not None and not callable(getattr(retriever, "retrieve", None)):
            raise ValueError(f"retriever must implement retrieve(query, k) or be None, got {retriever!r:.80}")
        self.checker, self.generator = checker, generator
        self.metric = get_metric(metric)
        self.config = config or ImProverConfig()
        if retriever is None and self.metric.examples and self.config.examples > 0:
            retriever = ExampleRetriever(self.metric.examples)
        self.retriever = retriever

    def with_config(self, **changes) -> ImProver:
        unknown = sorted(set(changes) - set(ImProverConfig.__dataclass_fields__))
        if unknown:
            raise ValueError(f"changes must name ImProverConfig fields, got unknown {unknown}")
        return ImProver(
            self.checker, self.generator, self.metric, replace(self.config, **changes), self.retriever
        )

    def _candidate(self, thm: Theorem, proof: str, result: CheckResult) -> Candidate:
        return Candidate(proof, result, self.metric.score(result) if result.correct else None)

    def _check(self, thm: Theorem, raw: list[str]) -> list[Candidate]:
        proofs, bad = [], {}
        for i, r in enumerate(raw):
            try:
                proofs.append(clean_candidate(r, thm.decl))
            except StatementChanged as e:
                proofs.append(r)
                bad[i] = str(e)
        results = check_many(
            self.checker, thm.context, thm.decl, [p if p.strip() else "sorry" for p in proofs]
        )
        out = []
        for i, (p, res) in enumerate(zip(proofs, results)):
            if i in bad:  # rejected: never checked against a different statement
                from .checker import Message

                res = CheckResult((), (Message("error", 0, f"statement changed: {bad[i]}"),))
            elif not p.strip():
                from .checker import Message

                res = CheckResult((), (Message("error", 1, "empty proof"),))
            out.append(self._candidate(thm, p, res))
        return out

    def improve(self, theorem: Theorem) -> Improvement:
        need_type("theorem", theorem, Theorem)
        return self.improve_all([theorem])[0]

    def improve_all(self, theorems: Sequence[Theorem]) -> list[Improvement]:
        if isinstance(theorems, (str, bytes)) or not isinstance(theorems, Sequence):
            raise ValueError(f"theorems must be a sequence of Theorem objects, got {type(theorems).__name__}")
        cfg, metric = self.config, self.metric
        theorems = list(theorems)
        for t in theorems:
            if not isinstance(t, Theorem):
                raise ValueError(f"theorems must be Theorem objects, got {type(t).__name__}")
        originals = [
            self._candidate(t, t.proof, self.checker.check(t.context, t.decl, t.proof)) for t in theorems
        ]
        states = list(originals)
        hist: list[list[Attempt]] = [[] for _ in theorems]
        gens = [0] * len(theorems)
        batch = getattr(self.generator, "generate_batch", None)
        for _round in range(cfg.m):
            inputs = [originals[i] if cfg.lock_refinement_state else states[i] for i in range(len(theorems))]
            prompts = []
            for i, t in enumerate(theorems):
                ex = self.retriever.retrieve(t.proof, cfg.examples) if self.retriever and cfg.examples else []
                prompts.append(build_prompt(t, inputs[i], metric, cfg, hist[i], ex))
            outs = (
                batch(prompts, cfg.n)
                if callable(batch)
                else [self.generator.generate(p, cfg.n) for p in prompts]
            )
            for i, t in enumerate(theorems):
                raw = list(outs[i])
                if len(raw) != cfg.n:
                    raise ValueError(f"generator returned {len(raw)} outputs for n={cfg.n}")
                gens[i] += cfg.n
                chosen = best_of_n(self._check(t, raw), metric, cfg.on_none)
                hist[i].append(attempt_record(inputs[i], chosen, metric))
                if cfg.lock_refinement_state:
                    states[i] = keep_best_update(states[i], chosen, metric, True) if cfg.keep_best else chosen
                else:
                    states[i] = keep_best_update(states[i], chosen, metric, cfg.keep_best)
        return [Improvement(t, originals[i], states[i], hist[i], gens[i]) for i, t in enumerate(theorems)]
