"""Transformer² on a real pretrained LM (the ``real`` preset; method card, "Real inputs").

SmolLM2-135M-Instruct (fp32, ``iclr25.assets.load_causal_lm``) gets SVF experts (§3.1, official sigmoid form) on
three real tasks with held-out splits, trained with the paper's REINFORCE objective (§3.2, Eq. 1: ±1 reward,
λ·KL to the base model):

* ``analogy`` — gensim's nine grammatical analogy sections (``load_analogies``), a few-shot prompt
  ``a -> b`` lines then ``c ->``; the answer is *generated* (sampled rollouts) and scored by exact match of the
  greedy answer (the text up to the first newline);
* ``sentiment`` — the labelled polarity sentences (``load_corpus("polarity")``, label pos/neg), label-word
  likelihood over `` negative`` / `` positive``;
* ``source`` — the source of a real document (Lee news, Wikipedia articles, 20-Newsgroups posts with their
  headers removed; ``load_corpus``), label-word likelihood over `` news`` / `` encyclopedia`` / `` forum``.

For the two label tasks the action is the label word (the classification variant: the policy is the model's
distribution restricted to the label words, the log-probability and the KL penalty are the full model's).
A fourth task, ``city-in-state`` analogies, is never used to train an expert: it is answered by two-pass
inference (§3.2) — pass 1, the base model classifies the prompt (label-word likelihood over the three task names;
the same dispatcher is scored on the three tasks' test prompts); pass 2, the routed expert answers.

Splits are per seed and disjoint by construction: analogy *word pairs* (per section), polarity sentences and
documents are shuffled by the seed and cut into train / validation / test; an item never appears in two splits and
a test analogy's shots come from test pairs only. The best-validation checkpoint (accuracy, ties broken by the mean
log-likelihood of the correct answers, step 0 included) is kept, as the official code does.

The ``full`` preset names the paper's model and training tasks (Llama-3-8B-Instruct; GSM8K, MBPP, ARC-Easy) and
reads them with :func:`load_task_table` from the hub or from local parquet files with the datasets' columns.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from iclr25.common.seeding import derive_seed, torch_generator

from .reinforce import reinforce_loss, rollout
from .svf import (
    apply_svf,
    count_svf_params,
    get_expert,
    reset_svf,
    set_expert,
    svf_disabled,
    svf_parameters,
    using_expert,
)
from .tasks import GRAM_SECTIONS, Item, TaskData, _cut, _rng

TASKS = ("analogy", "sentiment", "source")
SENTIMENT_LABELS = {"neg": " negative", "pos": " positive"}
SOURCES = {"lee": " news", "wikipedia": " encyclopedia", "newsgroups": " forum"}
# the dispatcher's label word per expert (pass 1 of two-pass inference)
DISPATCH_LABELS = {"analogy": " words", "sentiment": " review", "source": " article"}


# ---------------------------------------------------------------------------------------------------- task builders
def analogy_pairs(sections: tuple[str, ...]) -> dict[str, list[tuple[str, str]]]:
    """The distinct word pairs of each analogy section (a row a:b::c:d holds the pairs (a, b) and (c, d))."""
    from iclr25.assets import load_analogies

    ds = load_analogies()
    known = set(ds["section"])
    bad = [s for s in sections if s not in known]
    if bad:
        raise ValueError(f"sections must be analogy sections ({sorted(known)}), got {bad}")
    out: dict[str, set] = {s: set() for s in sections}
    for r in ds:
        if r["section"] in out:
            out[r["section"]].update([(r["a"], r["b"]), (r["c"], r["d"])])
    return {s: sorted(p) for s, p in out.items()}


def _analogy_items(pairs: list[tuple[str, str]], section: str, shots: int, rng) -> list[Item]:
    items = []
    for i, (c, d) in enumerate(pairs):
        others = [j for j in range(len(pairs)) if j != i]
        pick = rng.choice(others, size=shots, replace=False)
        lines = "".join(f"{pairs[j][0]} -> {pairs[j][1]}\n" for j in pick)
        items.append(Item(f"{lines}{c} ->", f" {d}", f"{section}:{c}:{d}"))
    return items


def build_analogy(
    seed: int, sections: tuple[str, ...], shots: int, test_frac: float, val_frac: float, name: str = "analogy"
) -> TaskData:
    """Per section, the distinct pairs are shuffled by the seed and cut into test / val / train (fractions of the
    section's pairs, at least ``shots + 1`` per split); each pair is one item whose ``shots`` example lines are
    other pairs of the same section *and split*."""
    splits: dict[str, list[Item]] = {"train": [], "val": [], "test": []}
    counts = {"pairs": 0}
    for sec, pairs in analogy_pairs(sections).items():
        rng = _rng(seed, name, sec)
        order = [pairs[i] for i in rng.permutation(len(pairs))]
        n_test = max(shots + 1, round(test_frac * len(order)))
        n_val = max(shots + 1, round(val_frac * len(order)))
        te, va, tr = _cut(len(order), n_test, n_val)
        for split, sl in (("test", te), ("val", va), ("train", tr)):
            if len(order[sl]) < shots + 1:
                raise ValueError(
                    f"section {sec!r}: {len(order[sl])} {split} pairs, need >= shots + 1 = {shots + 1}"
                )
            splits[split] += _analogy_items(order[sl], sec, shots, rng)
        counts["pairs"] += len(pairs)
    counts |= {k: len(v) for k, v in splits.items()}
    return TaskData(name, "generate", (), splits["train"], splits["val"], splits["test"], counts)


def _snippet(text: str, tokenizer, max_tokens: int) -> str:
    ids = tokenizer(text, add_special_tokens=False)["input_ids"][:max_tokens]
    return tokenizer.decode(ids).strip()


def build_sentiment(seed: int, tokenizer, n_test: int, n_val: int, max_tokens: int) -> TaskData:
    """The polarity sentences (all of them, label pos/neg), shuffled by the seed, cut into test / val / train."""
    from iclr25.assets import load_corpus

    ds = load_corpus("polarity")
    rows = [(r["doc_id"], r["text"], r["label"]) for r in ds]
    bad = sorted({lab for _, _, lab in rows} - set(SENTIMENT_LABELS))
    if bad:
        raise ValueError(f"polarity labels must be {sorted(SENTIMENT_LABELS)}, got {bad}")
    labels = tuple(SENTIMENT_LABELS.values())
    order = [rows[i] for i in _rng(seed, "sentiment").permutation(len(rows))]
    items = [
        Item(
            f"Review: {_snippet(t, tokenizer, max_tokens)}\nSentiment:",
            SENTIMENT_LABELS[lab],
            key,
            labels.index(SENTIMENT_LABELS[lab]),
        )
        for key, t, lab in order
    ]
    te, va, tr = _cut(len(items), n_test, n_val)
    counts = {"sentences": len(rows), "test": n_test, "val": n_val, "train": len(items[tr])}
    return TaskData("sentiment", "label", labels, items[tr], items[va], items[te], counts)


_HEADER_LINE = re.compile(r"[A-Za-z][A-Za-z0-9-]*: ")


def strip_headers(text: str) -> str:
    """A news post without its header block (``Newsgroups:``, ``Path:``, ``From:`` … up to the first blank line),
    which names the newsgroup; a text that does not start with a header line is returned unchanged."""
    text = text.replace("\r\n", "\n")
    if not _HEADER_LINE.match(text):
        return text
    head, sep, body = text.partition("\n\n")
    return body if sep else ""


def source_documents(tokenizer, max_tokens: int, min_words: int) -> dict[str, list[tuple[str, str]]]:
    """``{source: [(doc_id, snippet)]}``: each document's first ``max_tokens`` tokens (whitespace collapsed;
    newsgroup posts without headers), documents with fewer than ``min_words`` words after that dropped."""
    from iclr25.assets import load_corpus

    out = {}
    for src in SOURCES:
        docs = []
        for r in load_corpus(src):
            text = strip_headers(r["text"]) if src == "newsgroups" else r["text"]
            text = " ".join(text.split())
            if len(text.split()) >= min_words:
                docs.append((r["doc_id"], _snippet(text, tokenizer, max_tokens)))
        out[src] = docs
    return out


def build_source(
    seed: int, tokenizer, n_test: int, n_val: int, n_train: int, max_tokens: int, min_words: int
) -> TaskData:
    """Per source, ``n_test`` / ``n_val`` / up to ``n_train`` documents drawn by the seed (balanced classes)."""
    docs = source_documents(tokenizer, max_tokens, min_words)
    labels = tuple(SOURCES.values())
    splits: dict[str, list[Item]] = {"train": [], "val": [], "test": []}
    counts: dict[str, int] = {}
    for src, rows in docs.items():
        order = [rows[i] for i in _rng(seed, "source", src).permutation(len(rows))]
        te, va, tr = _cut(len(order), n_test, n_val)
        tr = slice(tr.start, min(tr.stop, tr.start + n_train))
        lab = labels.index(SOURCES[src])
        for split, sl in (("test", te), ("val", va), ("train", tr)):
            splits[split] += [
                Item(f"Text: {snip}\nThis text is from a", SOURCES[src], f"{src}:{key}", lab)
                for key, snip in order[sl]
            ]
        counts[f"docs_{src}"] = len(rows)
    counts |= {k: len(v) for k, v in splits.items()}
    rng = _rng(seed, "source", "mix")
    for k in splits:  # interleave the sources
        splits[k] = [splits[k][i] for i in rng.permutation(len(splits[k]))]
    return TaskData("source", "label", labels, splits["train"], splits["val"], splits["test"], counts)


# ------------------------------------------------------------------------------------------------------- the model
_MODEL: dict[tuple, tuple[Any, Any, str, float]] = {}


def svf_targets(n_layers: int, modules: tuple[str, ...], first_layer: int) -> str:
    """The full-match regex of the ``modules`` (e.g. ``gate_proj``) of decoder layers ``first_layer`` … last."""
    if not 0 <= first_layer < n_layers:
        raise ValueError(f"svf_first_layer must be in [0, {n_layers}) for this model, got {first_layer}")
    layers = "|".join(str(i) for i in range(first_layer, n_layers))
    return rf"model\.layers\.({layers})\.mlp\.({'|'.join(re.escape(m) for m in modules)})"


def load_model(
    name: str, modules: tuple[str, ...], first_layer: int = 0, device: str = "cpu"
) -> tuple[Any, Any, str, float]:
    """``(model, tokenizer, target regex, seconds)``: the LM with SVF (official form) on the MLP ``modules`` of
    layers ``first_layer`` … last, loaded once per process (forked seed workers inherit it; each seed
    re-initialises z)."""
    key = (name, modules, first_layer, device)
    if key not in _MODEL:
        from iclr25.assets import load_causal_lm

        t0 = time.perf_counter()
        model, tok = load_causal_lm(name, dtype="float32", device=device)
        targets = svf_targets(model.config.num_hidden_layers, modules, first_layer)
        apply_svf(model, targets, mode="official")
        model.eval()
        _MODEL[key] = (model, tok, targets, time.perf_counter() - t0)
    return _MODEL[key]


def single_tokens(tokenizer, words: tuple[str, ...]) -> list[int]:
    """The token id of each word (each must be exactly one token)."""
    ids = []
    for w in words:
        t = tokenizer(w, add_special_tokens=False)["input_ids"]
        if len(t) != 1:
            raise ValueError(f"label word {w!r} must be one token of the tokenizer, got {len(t)} tokens {t}")
        ids.append(t[0])
    return ids


def _device(model) -> torch.device:
    return next(model.parameters()).device


def _encode_left(tokenizer, texts: list[str], device) -> tuple[torch.Tensor, torch.Tensor]:
    side = tokenizer.padding_side
    tokenizer.padding_side = "left"
    enc = tokenizer(texts, return_tensors="pt", padding=True, add_special_tokens=False)
    tokenizer.padding_side = side
    return enc["input_ids"].to(device), enc["attention_mask"].to(device)


def last_logprobs(model, tokenizer, prompts: list[str], batch: int = 32) -> torch.Tensor:
    """``log π(· | prompt)`` at the next position, full vocabulary: (N, V)."""
    out = []
    for i in range(0, len(prompts), batch):
        ids, am = _encode_left(tokenizer, prompts[i : i + batch], _device(model))
        logits = model(input_ids=ids, attention_mask=am, logits_to_keep=1).logits[:, -1].float()
        out.append(F.log_softmax(logits, -1))
    return torch.cat(out)


@torch.no_grad()
def label_scores(
    model, tokenizer, items: list[Item], label_ids: list[int], batch: int = 32
) -> tuple[np.ndarray, np.ndarray]:
    """Label-word likelihood: ``(correct (N,), log-prob of the correct label word (N,))`` — the prediction is the
    label word with the highest next-token log-probability."""
    lp = last_logprobs(model, tokenizer, [it.prompt for it in items], batch)[:, label_ids]  # (N, L)
    y = torch.tensor([it.label for it in items])
    return (lp.argmax(-1) == y).numpy(), lp.gather(1, y[:, None]).squeeze(1).numpy()


def _answer_ids(tokenizer, answers: list[str], nl: int) -> list[list[int]]:
    return [tokenizer(a, add_special_tokens=False)["input_ids"] + [nl] for a in answers]


def newline_id(tokenizer) -> int:
    t = tokenizer("\n", add_special_tokens=False)["input_ids"]
    if len(t) != 1:
        raise ValueError(f"the tokenizer must encode a newline as one token, got {t}")
    return t[0]


@torch.no_grad()
def greedy_scores(model, tokenizer, items: list[Item], batch: int = 32) -> tuple[np.ndarray, np.ndarray]:
    """Exact match of the greedy answer, in one teacher-forced pass: the greedy continuation of the prompt is the
    answer followed by a newline iff the argmax at every answer position is the answer's next token (the answer's
    own tokenisation) and the argmax after it is the newline. Returns ``(correct (N,), mean log-prob of the answer's
    tokens (N,))``."""
    nl = newline_id(tokenizer)
    correct, loglik = [], []
    for i in range(0, len(items), batch):
        chunk = items[i : i + batch]
        p_ids = [tokenizer(it.prompt, add_special_tokens=False)["input_ids"] for it in chunk]
        a_ids = _answer_ids(tokenizer, [it.answer for it in chunk], nl)
        seqs = [p + a for p, a in zip(p_ids, a_ids)]
        L = max(map(len, seqs))
        pad = tokenizer.pad_token_id
        ids = torch.tensor([[pad] * (L - len(s)) + s for s in seqs], device=_device(model))
        am = torch.tensor([[0] * (L - len(s)) + [1] * len(s) for s in seqs], device=_device(model))
        lp = F.log_softmax(model(input_ids=ids, attention_mask=am).logits.float(), -1)
        for b, a in enumerate(a_ids):
            T = len(a)
            pos = torch.arange(L - T - 1, L - 1)
            tgt = torch.tensor(a)
            step_lp = lp[b, pos]
            correct.append(bool((step_lp.argmax(-1) == tgt).all()))
            loglik.append(float(step_lp.gather(1, tgt[:, None])[:-1].mean()))
    return np.array(correct), np.array(loglik)


def scores(model, tokenizer, task: TaskData, items: list[Item], label_ids: list[int] | None) -> tuple:
    if task.kind == "generate":
        return greedy_scores(model, tokenizer, items)
    return label_scores(model, tokenizer, items, label_ids)


# ----------------------------------------------------------------------------------------------------------- REINFORCE
@dataclass(frozen=True)
class RLSettings:
    steps: int
    batch_size: int
    lr: float
    kl_coef: float
    max_grad_norm: float
    eval_every: int
    temperature: float = 1.0
    max_new_tokens: int = 4


def _completion_mask(comp: torch.Tensor, stop: set[int]) -> torch.Tensor:
    """Tokens up to and including the first stop token (newline / eos)."""
    is_stop = torch.zeros_like(comp, dtype=torch.bool)
    for s in stop:
        is_stop |= comp == s
    before = torch.cumsum(is_stop.long(), 1) - is_stop.long()
    return before == 0


def _completion_logprobs(model, ids, am, comp, cmask) -> torch.Tensor:
    T = comp.shape[1]
    full = torch.cat([ids, comp], 1)
    fam = torch.cat([am, cmask.to(am.dtype)], 1)
    logits = model(input_ids=full, attention_mask=fam, logits_to_keep=T + 1).logits[:, :T]
    return F.log_softmax(logits.float(), -1)


def _rl_step_generate(model, tok, batch: list[Item], rl: RLSettings, g: torch.Generator) -> tuple:
    """Sampled rollouts of the answer; reward +1 for an exact match of the text before the first newline."""
    ids, am = _encode_left(tok, [it.prompt for it in batch], _device(model))
    comp, _ = rollout(
        model,
        ids,
        am,
        rl.max_new_tokens,
        greedy=False,
        temperature=rl.temperature,
        generator=g,
        eos_token_id=tok.eos_token_id,
        pad_token_id=tok.pad_token_id,
    )
    stop = {newline_id(tok), tok.eos_token_id}
    cmask = _completion_mask(comp, stop)
    texts = tok.batch_decode(comp, skip_special_tokens=True)
    r = torch.tensor(
        [1.0 if t.split("\n")[0].strip() == it.answer.strip() else -1.0 for t, it in zip(texts, batch)]
    )
    logp = _completion_logprobs(model, ids, am, comp, cmask)
    with torch.no_grad(), svf_disabled(model):
        ref = _completion_logprobs(model, ids, am, comp, cmask)
    return logp, comp, cmask, r, ref


def _rl_step_label(
    model, tok, batch: list[Item], rl: RLSettings, g: torch.Generator, label_ids: list[int]
) -> tuple:
    """Classification variant: the action is a label word drawn from the policy restricted to the label words."""
    ids, am = _encode_left(tok, [it.prompt for it in batch], _device(model))
    logits = model(input_ids=ids, attention_mask=am, logits_to_keep=1).logits[:, -1].float()
    logp = F.log_softmax(logits, -1)[:, None]  # (B, 1, V)
    lab = torch.tensor(label_ids)
    probs = torch.softmax(logp[:, 0, lab].detach() / rl.temperature, -1)
    pick = torch.multinomial(probs.cpu(), 1, generator=g).squeeze(1)
    comp = lab[pick][:, None].to(ids.device)
    cmask = torch.ones_like(comp, dtype=torch.bool)
    r = torch.tensor([1.0 if int(p) == it.label else -1.0 for p, it in zip(pick, batch)])
    with torch.no_grad(), svf_disabled(model):
        ref = F.log_softmax(
            model(input_ids=ids, attention_mask=am, logits_to_keep=1).logits[:, -1].float(), -1
        )
    return logp, comp, cmask, r, ref[:, None]


def train_expert(
    model, tok, task: TaskData, rl: RLSettings, seed: int, label_ids: list[int] | None = None
) -> dict:
    """REINFORCE (Eq. 1) of the current z on ``task.train``: Adam, grad-norm clip, the best-validation checkpoint
    (accuracy, ties broken by the mean log-likelihood of the correct answers; step 0 included). Returns the
    history and the best step; z is left at the best checkpoint."""
    params = svf_parameters(model)
    opt = torch.optim.Adam(params, lr=rl.lr)

    def val() -> tuple[float, float]:
        c, ll = scores(model, tok, task, task.val, label_ids)
        return float(c.mean()), float(ll.mean())

    best, best_step = val(), 0
    best_z = get_expert(model)
    hist = [{"step": 0, "val_acc": best[0], "val_loglik": best[1]}]
    for step in range(rl.steps):
        g = torch_generator(derive_seed(seed, "t2real-rl", task.name, step))
        idx = torch.randint(0, len(task.train), (rl.batch_size,), generator=g).tolist()
        batch = [task.train[i] for i in idx]
        if task.kind == "generate":
            logp, comp, cmask, r, ref = _rl_step_generate(model, tok, batch, rl, g)
        else:
            logp, comp, cmask, r, ref = _rl_step_label(model, tok, batch, rl, g, label_ids)
        loss, st = reinforce_loss(logp, comp, cmask, r, ref, rl.kl_coef, "ref_policy")
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, rl.max_grad_norm)
        opt.step()
        rec = {"step": step + 1, "reward": float(r.mean()), "kl": st["kl"]}
        if (step + 1) % rl.eval_every == 0 or step + 1 == rl.steps:
            v = val()
            rec |= {"val_acc": v[0], "val_loglik": v[1]}
            if v > best:
                best, best_step, best_z = v, step + 1, get_expert(model)
        hist.append(rec)
    set_expert(model, best_z)
    return {
        "history": hist,
        "best_step": best_step,
        "best_val_acc": best[0],
        "train_reward": [h.get("reward") for h in hist[1:]],
    }


# ------------------------------------------------------------------------------------------------------- dispatch
DISPATCH_INSTRUCTION = (
    "Sort each input into its task: words (a list of word pairs), review (a movie review) or article (the start "
    "of a news story, an encyclopedia article or a forum post).\n\n"
)


def truncate(tokenizer, text: str, max_tokens: int) -> str:
    """The text's first ``max_tokens`` tokens (decoded)."""
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    return text if len(ids) <= max_tokens else tokenizer.decode(ids[:max_tokens])


def dispatch_prefix(tokenizer, examples: dict[str, str], max_tokens: int) -> str:
    """The few-shot classification prompt: the instruction, then one ``Input: … / Task: <label>`` example per task
    (in the order given), each input cut to its first ``max_tokens`` tokens."""
    parts = [DISPATCH_INSTRUCTION]
    for task, prompt in examples.items():
        parts.append(f"Input: {truncate(tokenizer, prompt, max_tokens)}\nTask:{DISPATCH_LABELS[task]}\n\n")
    return "".join(parts)


@torch.no_grad()
def prefix_logprobs(model, tokenizer, prefix: str, queries: list[str], batch: int = 32) -> torch.Tensor:
    """``log π(· | prefix + query)`` at each query's last token (N, V), the shared prefix run once and its KV cache
    reused (queries right-padded; equal to running each full text alone)."""
    import copy

    dev = _device(model)
    pid = tokenizer(prefix, return_tensors="pt", add_special_tokens=False)["input_ids"].to(dev)
    past = model(input_ids=pid, use_cache=True).past_key_values
    out = []
    side = tokenizer.padding_side
    tokenizer.padding_side = "right"
    try:
        for i in range(0, len(queries), batch):
            enc = tokenizer(
                queries[i : i + batch], return_tensors="pt", padding=True, add_special_tokens=False
            )
            ids, qm = enc["input_ids"].to(dev), enc["attention_mask"].to(dev)
            B = ids.shape[0]
            cache = copy.deepcopy(past)
            cache.batch_repeat_interleave(B)
            am = torch.cat([torch.ones(B, pid.shape[1], dtype=qm.dtype, device=dev), qm], 1)
            logits = model(input_ids=ids, attention_mask=am, past_key_values=cache).logits
            last = qm.sum(1) - 1
            out.append(F.log_softmax(logits[torch.arange(B), last].float(), -1))
    finally:
        tokenizer.padding_side = side
    return torch.cat(out)


def dispatch_query(tokenizer, prompt: str, max_tokens: int) -> str:
    return f"Input: {truncate(tokenizer, prompt, max_tokens)}\nTask:"


@torch.no_grad()
def prompt_dispatch(
    model, tok, prefix: str, prompts: list[str], max_tokens: int, tasks: tuple[str, ...] = TASKS
) -> list[str]:
    """Pass 1 (§3.2, prompt-based adaptation): the *base* model (SVF off) reads the prompt (its first
    ``max_tokens`` tokens) after the few-shot classification prompt ``prefix``; the route is the task whose label
    word is most likely."""
    ids = single_tokens(tok, tuple(DISPATCH_LABELS[t] for t in tasks))
    with svf_disabled(model):
        lp = prefix_logprobs(model, tok, prefix, [dispatch_query(tok, p, max_tokens) for p in prompts])[
            :, ids
        ]
    return [tasks[i] for i in lp.argmax(-1).tolist()]


# ------------------------------------------------------------------------------------------------------ one seed
def rl_settings(cfg) -> RLSettings:
    rl = cfg.rl
    return RLSettings(
        steps=rl.steps,
        batch_size=rl.batch_size,
        lr=rl.lr,
        kl_coef=rl.kl_coef,
        max_grad_norm=rl.max_grad_norm,
        eval_every=rl.eval_every,
        temperature=rl.temperature,
        max_new_tokens=rl.max_new_tokens,
    )


def build_tasks(cfg, seed: int, tok) -> tuple[dict[str, TaskData], TaskData]:
    """The three expert tasks and the held-out task of one seed."""
    tasks = {
        "analogy": build_analogy(
            seed, cfg.analogy_sections, cfg.analogy_shots, cfg.analogy_test_frac, cfg.analogy_val_frac
        ),
        "sentiment": build_sentiment(seed, tok, cfg.sentiment_test, cfg.sentiment_val, cfg.doc_tokens),
        "source": build_source(
            seed, tok, cfg.source_test, cfg.source_val, cfg.source_train, cfg.doc_tokens, cfg.source_min_words
        ),
    }
    held = build_analogy(
        seed,
        (cfg.heldout_section,),
        cfg.analogy_shots,
        cfg.heldout_test_frac,
        cfg.analogy_val_frac,
        name="heldout",
    )
    return tasks, held


def _acc(c: np.ndarray) -> float:
    return float(np.mean(c))


def one_seed(cfg, seed: int) -> dict:
    """One seed: splits, base scores, one SVF expert per task (REINFORCE, best-validation checkpoint), the experts'
    test scores, prompt-based dispatch on the three tasks' test prompts, two-pass answers on the held-out task."""
    t0 = time.perf_counter()
    torch.manual_seed(derive_seed(seed, "t2real"))
    model, tok, targets, _ = load_model(cfg.model, cfg.svf_modules, cfg.svf_first_layer, cfg.device)
    tasks, held = build_tasks(cfg, seed, tok)
    label_ids = {n: single_tokens(tok, t.labels) if t.labels else None for n, t in tasks.items()}
    rl = rl_settings(cfg)
    r: dict = {"counts": {n: t.counts for n, t in tasks.items()} | {"heldout": held.counts}}
    r["base"], r["expert"], r["gain"], r["best_step"], r["val_acc"], r["train_reward"] = (
        {},
        {},
        {},
        {},
        {},
        {},
    )
    experts = {}
    for n, task in tasks.items():
        with svf_disabled(model):
            r["base"][n] = _acc(scores(model, tok, task, task.test, label_ids[n])[0])
        reset_svf(model, derive_seed(seed, "t2real-init", n))  # the official init, z = 0.1 + 0.01·N(0, 1)
        h = train_expert(model, tok, task, rl, seed, label_ids[n])
        experts[n] = get_expert(model)
        r["expert"][n] = _acc(scores(model, tok, task, task.test, label_ids[n])[0])
        r["gain"][n] = r["expert"][n] - r["base"][n]
        r["best_step"][n] = h["best_step"]
        r["val_acc"][n] = {"step0": h["history"][0]["val_acc"], "best": h["best_val_acc"]}
        rw = [x for x in h["train_reward"] if x is not None]
        half = max(1, len(rw) // 2)
        r["train_reward"][n] = {
            "first_half": float(np.mean(rw[:half])),
            "second_half": float(np.mean(rw[half:] or rw)),
        }
    # pass 1: the base model routes each test prompt (few-shot prompt from one train prompt per task)
    prefix = dispatch_prefix(tok, {n: tasks[n].train[0].prompt for n in TASKS}, cfg.dispatch_tokens)
    prompts, truth = [], []
    for n in TASKS:
        its = tasks[n].test[: cfg.dispatch_per_task]
        prompts += [it.prompt for it in its]
        truth += [n] * len(its)
    routes = prompt_dispatch(model, tok, prefix, prompts, cfg.dispatch_tokens)
    ok = np.array([a == b for a, b in zip(routes, truth)])
    r["dispatch"] = {"routing_acc": _acc(ok)} | {
        f"routing_acc_{n}": _acc(ok[[t == n for t in truth]]) for n in TASKS
    }
    # held-out task: base, each single expert, and two-pass (prompt dispatch → routed expert)
    with svf_disabled(model):
        base_c = greedy_scores(model, tok, held.test)[0]
    single = {}
    for n in TASKS:
        with using_expert(model, experts[n]):
            single[n] = greedy_scores(model, tok, held.test)[0]
    hroutes = prompt_dispatch(model, tok, prefix, [it.prompt for it in held.test], cfg.dispatch_tokens)
    two = np.array([single[rt][i] for i, rt in enumerate(hroutes)])
    r["heldout"] = {
        "base": _acc(base_c),
        "two_pass": _acc(two),
        "gain": _acc(two) - _acc(base_c),
        "routes": {n: int(sum(rt == n for rt in hroutes)) for n in TASKS},
        "single": {n: _acc(c) for n, c in single.items()},
    }
    r["params"] = {"svf": int(sum(z.numel() for z in experts["analogy"].values())), "targets": targets}
    r["seconds"] = time.perf_counter() - t0
    return r


def required_keys(cfg) -> tuple[str, ...]:
    keys = tuple(f"{k}/{n}" for k in ("base", "expert", "gain") for n in TASKS)
    return keys + ("dispatch/routing_acc", "heldout/base", "heldout/two_pass")


def claims(cfg, per_seed: dict) -> list:
    from iclr25.common.claims import all_of, make_claim
    from iclr25.common.results import values

    parts = [
        make_claim(
            f"real_expert_gain.{n}",
            f"the {n} expert beats the base model on the {n} test split (paired per seed)",
            f"{n} test accuracy, expert − base",
            values(per_seed, f"expert/{n}"),
            0.0,
            ">",
            baseline=values(per_seed, f"base/{n}"),
            compare="difference",
        )
        for n in TASKS
    ]
    steps = cfg.rl.steps
    out = [
        all_of(
            "real_expert_gain",
            "each SVF expert beats the base SmolLM2 on its own task's test split (analogy exact match, sentiment and "
            "document-source label-word accuracy; paired per seed)",
            parts,
            note=f"{steps} REINFORCE steps of {cfg.rl.batch_size} prompts per expert; best-validation checkpoint",
        ),
        make_claim(
            "real_dispatch",
            "the prompt-based dispatcher (base model, few-shot classification prompt) picks the matching expert for "
            ">= 80 % of the three tasks' test prompts",
            "routing accuracy",
            values(per_seed, "dispatch/routing_acc"),
            0.8,
            ">=",
        ),
        make_claim(
            "real_adaptation",
            f"two-pass adaptation (prompt dispatch, then the routed expert) on the held-out {cfg.heldout_section} "
            "analogies is at least as accurate as the base model (paired per seed)",
            "held-out exact match, two-pass − base",
            values(per_seed, "heldout/two_pass"),
            0.0,
            ">=",
            baseline=values(per_seed, "heldout/base"),
            compare="difference",
        ),
        make_claim(
            "real_headroom",
            "precondition: the base model leaves headroom on every expert task (test accuracy <= 0.95)",
            "max base test accuracy over the three tasks",
            [max(per_seed[s]["base"][n] for n in TASKS) for s in per_seed],
            0.95,
            "<=",
            check="precondition: an expert can only beat a base model that is not already at the ceiling",
        ),
    ]
    return out


def validity(cfg, per_seed: dict) -> tuple[bool, str]:
    worst = max(per_seed[s]["base"][n] for s in per_seed for n in TASKS)
    ok = worst <= 0.95
    return ok, "" if ok else f"base test accuracy {worst:.3f} > 0.95 on some task: no headroom for an expert"


def report_md(cfg, per_seed: dict) -> str:
    lines = [
        "## Real inputs: SmolLM2-135M-Instruct, SVF experts on three real tasks",
        "",
        "| seed | "
        + " | ".join(f"{n} base → expert" for n in TASKS)
        + " | dispatch | held-out base → two-pass | routes |",
        "|---|" + "---|" * (len(TASKS) + 3),
    ]
    for s, r in sorted(per_seed.items()):
        cells = [f"{r['base'][n]:.3f} → {r['expert'][n]:.3f}" for n in TASKS]
        h = r["heldout"]
        lines.append(
            f"| {s} | " + " | ".join(cells) + f" | {r['dispatch']['routing_acc']:.3f} | {h['base']:.3f} → "
            f"{h['two_pass']:.3f} | {h['routes']} |"
        )
    return "\n".join(lines) + "\n"


def figure(cfg, per_seed: dict, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 3))
    names = [*TASKS, "heldout"]
    base = [
        np.mean(
            [per_seed[s]["base"][n] if n != "heldout" else per_seed[s]["heldout"]["base"] for s in per_seed]
        )
        for n in names
    ]
    exp_ = [
        np.mean(
            [
                per_seed[s]["expert"][n] if n != "heldout" else per_seed[s]["heldout"]["two_pass"]
                for s in per_seed
            ]
        )
        for n in names
    ]
    x = np.arange(len(names))
    ax.bar(x - 0.2, base, 0.4, label="base")
    ax.bar(x + 0.2, exp_, 0.4, label="expert / two-pass")
    ax.set_xticks(x, names)
    ax.set_ylabel("test accuracy")
    ax.legend()
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)
    return path


def run(cfg, out):
    from iclr25.common.progress import log
    from iclr25.common.results import aggregate
    from iclr25.harness.rundir import RunDir, RunResult

    load_model(cfg.model, cfg.svf_modules, cfg.svf_first_layer, cfg.device)  # once, before the workers fork
    rd = RunDir(out, cfg, required=required_keys(cfg))

    def fn(s: int) -> dict:
        r = one_seed(cfg, s)
        log(
            f"[transformer2 real] seed {s}: gains {r['gain']}, dispatch {r['dispatch']['routing_acc']:.3f}, {r['seconds']:.0f} s"
        )
        return r

    per_seed = rd.map_seeds(fn, cfg.seed_list)
    valid, reason = validity(cfg, per_seed)
    return RunResult(
        seeds=cfg.seed_list,
        metrics=aggregate(per_seed),
        claims=claims(cfg, per_seed),
        per_seed=per_seed,
        figures=[figure(cfg, per_seed, rd.figures / "real_experts.png")],
        report_md=report_md(cfg, per_seed),
        valid=valid,
        invalid_reason=reason,
    )


__all__ = [
    "GRAM_SECTIONS",
    "TASKS",
    "Item",
    "TaskData",
    "analogy_pairs",
    "build_analogy",
    "build_sentiment",
    "build_source",
    "strip_headers",
    "source_documents",
    "load_model",
    "single_tokens",
    "label_scores",
    "greedy_scores",
    "train_expert",
    "prompt_dispatch",
    "count_svf_params",
    "reset_svf",
    "using_expert",
]
