"""Proof generators: an OpenAI-compatible LLM client, a small LM trained on the toy language, a test double.

* :class:`OpenAICompatibleGenerator` — the ``openai`` SDK against any OpenAI-compatible chat endpoint (vLLM,
  llama.cpp server, Ollama, OpenAI). The paper uses GPT-4o through this API.
* :class:`TinyLMGenerator` — a Hugging Face causal LM (a few hundred thousand parameters) trained from scratch
  on the toy language to rewrite proofs, sampled with temperature: a real, imperfect learned generator for
  offline runs. It reads the ``<CURRENT>`` block (with the Chain-of-States comments reduced to their ``⊢``
  lines to fit its context) and the first error of the latest attempt; it ignores retrieved examples.
* :class:`ScriptedRewriter` — a seeded rule-based double for unit tests and a labelled report-only arm; it
  shows nothing about language models.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

import numpy as np
import torch

from ..common.checks import need_int, need_pairs, need_real, need_seed, need_str
from .agent import current_block, last_errors
from .chain_of_states import strip_chain_of_states


def _cache_kw(model, cache) -> dict:
    """The cache keyword of ``model.forward``: ``cache`` in transformers releases that renamed it (passing the
    old ``past_key_values`` there warns that it is deprecated), ``past_key_values`` in earlier ones."""
    import inspect

    params = inspect.signature(model.forward).parameters
    return {"cache": cache} if "cache" in params else {"past_key_values": cache}


class OpenAICompatibleGenerator:
    """``generate(messages, n)`` through ``client.chat.completions.create`` (``n`` choices per call).

    ``base_url``/``api_key``/``model`` default to ``OPENAI_BASE_URL``/``OPENAI_API_KEY``/``OPENAI_MODEL``.
    Servers that return fewer choices than asked are called again until ``n`` outputs are collected.
    Retries on transient HTTP errors are the SDK's (``max_retries``).
    """

    def __init__(
        self,
        model: str | None = None,
        base_url: str | None = None,
        api_key: str | None = None,
        temperature: float = 1.0,
        max_tokens: int = 2048,
        timeout_s: float = 120.0,
        max_retries: int = 2,
    ):
        import os

        try:
            import openai
        except ImportError as e:  # pragma: no cover - depends on the environment
            raise ImportError(
                "OpenAICompatibleGenerator needs the openai SDK: pip install 'iclr25[agents]'"
            ) from e
        model = model or os.environ.get("OPENAI_MODEL")
        if model is not None and not isinstance(model, str):
            raise ValueError(f"model must be a str naming the served model, got {model!r}")
        if not model:
            raise ValueError("model must name the served model (or set OPENAI_MODEL), got None")
        if isinstance(temperature, bool) or not (
            isinstance(temperature, (int, float)) and 0 <= temperature <= 2
        ):
            raise ValueError(f"temperature must be in [0, 2], got {temperature!r}")
        if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
            raise ValueError(f"max_tokens must be a positive int, got {max_tokens!r}")
        self.model, self.temperature, self.max_tokens = model, float(temperature), max_tokens
        self.base_url = base_url or os.environ.get("OPENAI_BASE_URL") or "https://api.openai.com/v1"
        self.client = openai.OpenAI(
            base_url=self.base_url,
            api_key=api_key or os.environ.get("OPENAI_API_KEY") or "EMPTY",
            timeout=timeout_s,
            max_retries=max_retries,
        )

    def _create(self, messages: list[dict], n: int):
        """One chat-completions call; a body that is not a chat completion raises a ``ValueError`` naming the
        server and the first bytes it sent (instead of a bare ``JSONDecodeError``)."""
        import json

        raw = self.client.chat.completions.with_raw_response.create(
            model=self.model,
            messages=messages,
            n=n,
            temperature=self.temperature,
            max_tokens=self.max_tokens,
        )
        head = raw.http_response.text[:120]
        try:
            resp = raw.parse()
        except (json.JSONDecodeError, UnicodeDecodeError):
            resp = None
        if resp is None or isinstance(resp, (str, bytes)) or not hasattr(resp, "choices"):
            raise ValueError(
                f"server {self.base_url!r} (model {self.model!r}) answered with a body that is not a chat "
                f"completion (HTTP {raw.http_response.status_code}, "
                f"{raw.http_response.headers.get('content-type', '?')}); first bytes: {head!r}"
            )
        return resp

    def generate(self, messages: list[dict], n: int) -> list[str]:
        if not isinstance(n, int) or n < 1:
            raise ValueError(f"n must be an int >= 1, got {n!r}")
        outs: list[str] = []
        for _ in range(n):  # at most n calls
            resp = self._create(messages, n - len(outs))
            choices = getattr(resp, "choices", None)
            if not choices:
                raise ValueError(
                    f"server {self.base_url!r} returned no choices for model {self.model!r}: {str(resp)[:200]}"
                )
            for c in choices:
                content = getattr(getattr(c, "message", None), "content", None)
                if not isinstance(content, str):
                    raise ValueError(
                        f"server {self.base_url!r} returned a choice without text content: {str(c)[:200]}"
                    )
                outs.append(content)
            if len(outs) >= n:
                break
        return outs[:n]


# ----------------------------------------------------------------------------------------------------------
# Scripted double
# ----------------------------------------------------------------------------------------------------------
_TERM_HAVE = re.compile(r"^(\s*)(· )?have (\w+) : [^=]+ := (?!by\b)(.+)$")


def _paren(t: str) -> str:
    t = t.strip()
    return f"({t})" if " " in t and not (t.startswith("⟨") and t.endswith("⟩")) else t


def _ind(ln: str) -> int:
    return len(ln) - len(ln.lstrip(" "))


def _block_last(lines: list[str], i: int) -> bool:
    """Is line i the last line of its block?"""
    return (
        i + 1 >= len(lines)
        or _ind(lines[i + 1]) < _ind(lines[i])
        or lines[i + 1].lstrip().startswith("·")
        and _ind(lines[i + 1]) < _ind(lines[i])
    )


def scripted_edits(proof: str) -> list[tuple[str, str]]:
    """Every single simplification the double knows, as (edit name, new proof); correct by design."""
    need_str("proof", proof)
    lines = proof.split("\n")
    out = []
    for i, ln in enumerate(lines):
        m = _TERM_HAVE.match(ln)
        if m:
            name, term = m.group(3), m.group(4)
            rest = [re.sub(rf"(?<![\w.]){re.escape(name)}(?![\w'])", _paren(term), x) for x in lines[i + 1 :]]
            if m.group(2):  # `· have …` : the bullet moves to the next line of its block
                if not rest or _ind(rest[0]) != _ind(ln) + 2:
                    rest = None
                else:
                    rest[0] = ln[: _ind(ln)] + "· " + rest[0].strip()
            if rest is not None:
                out.append(("inline_have", "\n".join(lines[:i] + rest)))
        s = ln.strip()
        nxt = lines[i + 1] if i + 1 < len(lines) else ""
        body = s[2:] if s.startswith("· ") else s
        prefix = ln[: _ind(ln)] + ("· " if s.startswith("· ") else "")
        if (
            body.startswith("apply ")
            and nxt.strip().startswith("exact ")
            and _ind(nxt) == _ind(ln) + (2 if s.startswith("· ") else 0)
            and _block_last(lines, i + 1)
        ):
            new = f"{prefix}exact {body[6:].strip()} {_paren(nxt.strip()[6:])}"
            out.append(("apply_exact", "\n".join(lines[:i] + [new] + lines[i + 2 :])))
        if body in ("left", "right") and nxt.strip().startswith("exact ") and _block_last(lines, i + 1):
            c = "Or.inl" if body == "left" else "Or.inr"
            new = f"{prefix}exact {c} {_paren(nxt.strip()[6:])}"
            out.append(("or_intro", "\n".join(lines[:i] + [new] + lines[i + 2 :])))
        if body == "constructor" and i + 2 < len(lines):
            a, b = lines[i + 1], lines[i + 2]
            k = _ind(ln) + (2 if s.startswith("· ") else 0)
            if (
                a.strip().startswith("· exact ")
                and b.strip().startswith("· exact ")
                and _ind(a) == k == _ind(b)
                and (i + 3 >= len(lines) or _ind(lines[i + 3]) <= k)
            ):
                new = f"{prefix}exact ⟨{a.strip()[8:]}, {b.strip()[8:]}⟩"
                out.append(("anon_constructor", "\n".join(lines[:i] + [new] + lines[i + 3 :])))
    return out


class ScriptedRewriter:
    """A seeded rule-based proof shortener for the toy language (a **test double**, not a language model).

    Each sample applies up to ``max_edits`` random simplifications from :func:`scripted_edits`; with
    probability ``p_error`` (× ``cos_factor`` when the prompt carries goal-state comments, × ``history_factor``
    when it carries an error message) the sample is corrupted by renaming one hypothesis to an unknown one.
    These factors are scripted, so any CoS/history effect measured with this double is built in.
    """

    def __init__(
        self,
        seed: int = 0,
        p_error: float = 0.3,
        max_edits: int = 3,
        cos_factor: float = 0.5,
        history_factor: float = 0.7,
    ):
        for name, v in (("p_error", p_error), ("cos_factor", cos_factor), ("history_factor", history_factor)):
            need_real(name, v, 0.0, 1.0)
        need_int("max_edits", max_edits, 0)
        need_seed("seed", seed)
        self.rng = np.random.default_rng(seed)
        self.p_error, self.max_edits = p_error, max_edits
        self.cos_factor, self.history_factor = cos_factor, history_factor

    def generate(self, messages: list[dict], n: int) -> list[str]:
        need_int("n", n, 1)
        _, shown = current_block(messages)
        cos = "/-" in shown
        proof = strip_chain_of_states(shown)
        p_err = self.p_error * (self.cos_factor if cos else 1.0)
        if last_errors(messages):
            p_err *= self.history_factor
        outs = []
        for _ in range(n):
            cur = proof
            for _ in range(int(self.rng.integers(1, self.max_edits + 1)) if self.max_edits else 0):
                edits = scripted_edits(cur)
                if not edits:
                    break
                cur = edits[int(self.rng.integers(len(edits)))][1]
            if self.rng.random() < p_err:
                names = sorted(set(re.findall(r"\bh\d+\b", cur)))
                if names:
                    cur = re.sub(rf"\b{names[int(self.rng.integers(len(names)))]}\b", "h99", cur, count=1)
            outs.append(cur)
        return outs


# ----------------------------------------------------------------------------------------------------------
# A small causal LM trained on the toy language
# ----------------------------------------------------------------------------------------------------------
_COS_COMMENT = re.compile(r"\n([ \t]*)/-\n(.*?)\n[ \t]*-/", re.S)


def compact_cos(proof_shown: str) -> str:
    """Reduce each Chain-of-States comment to one line with its ``⊢`` targets (or ``Goals Solved!``)."""

    def sub(m: re.Match) -> str:
        tg = [
            ln.strip() for ln in m.group(2).split("\n") if ln.strip().startswith("⊢") or "Goals Solved" in ln
        ]
        return f"\n{m.group(1)}-- " + " ".join(tg)

    return _COS_COMMENT.sub(sub, proof_shown)


def lm_prompt(decl: str, proof_shown: str, error: str = "") -> str:
    """The text the tiny LM conditions on (it then writes the new proof and an end-of-sequence token)."""
    err = f"E {error}\n" if error else ""
    return f"{decl}\n{compact_cos(proof_shown)}\n{err}=>\n"


def _error_summary(messages: list[dict]) -> str:
    errs = last_errors(messages)
    if not errs:
        return ""
    m = re.match(r"ERROR at line (\d+) \((.*?)\): (.*)", errs[0])
    return f"line {m.group(1)}: {m.group(3).split(chr(10))[0][:60]}" if m else errs[0][:60]


class TinyLMGenerator:
    """Sample proofs from a causal LM (``transformers``) given ImProver prompts; see :meth:`train`."""

    def __init__(
        self,
        model,
        tokenizer,
        temperature: float = 0.8,
        max_new_tokens: int = 96,
        seed: int = 0,
        max_prompt_tokens: int = 384,
    ):
        need_real("temperature", temperature, 0.0, lo_open=True)
        need_int("max_new_tokens", max_new_tokens, 1)
        need_int("max_prompt_tokens", max_prompt_tokens, 1)
        need_seed("seed", seed)
        if not callable(getattr(model, "eval", None)):
            raise ValueError(f"model must be a torch causal LM (with .eval()), got {type(model).__name__}")
        if not callable(tokenizer):
            raise ValueError(f"tokenizer must be a callable tokenizer, got {type(tokenizer).__name__}")
        self.model, self.tok = model.eval(), tokenizer
        self.temperature, self.max_new_tokens = float(temperature), int(max_new_tokens)
        self.max_prompt_tokens = int(max_prompt_tokens)
        self.gen = torch.Generator().manual_seed(int(seed))

    def encode(self, messages: list[dict]) -> str:
        decl, shown = current_block(messages)
        return lm_prompt(decl, shown, _error_summary(messages))

    def generate(self, messages: list[dict], n: int) -> list[str]:
        return self.generate_batch([messages], n)[0]

    @torch.no_grad()
    def generate_batch(self, prompts: Sequence[list[dict]], n: int, chunk: int = 128) -> list[list[str]]:
        """``n`` samples for every prompt (ancestral sampling with temperature), in batches of ``chunk``
        prompts, decoded with a static key/value cache."""
        if not isinstance(n, int) or n < 1:
            raise ValueError(f"n must be an int >= 1, got {n!r}")
        texts = [self.encode(p) for p in prompts]
        outs: list[str] = []
        for s in range(0, len(texts), chunk):
            outs += self._sample(texts[s : s + chunk], n)
        return [outs[i * n : (i + 1) * n] for i in range(len(prompts))]

    def _sample(self, texts: list[str], n: int) -> list[str]:
        from transformers import StaticCache

        tok, model = self.tok, self.model
        ids = [tok(t, add_special_tokens=False)["input_ids"][-self.max_prompt_tokens :] for t in texts]
        ids = [x for x in ids for _ in range(n)]  # each prompt n times, adjacent
        B, L, T = len(ids), max(len(x) for x in ids), self.max_new_tokens
        pad = tok.pad_token_id
        inp = torch.full((B, L), pad, dtype=torch.long)  # (B, L) left-padded
        att = torch.zeros((B, L + T), dtype=torch.long)  # (B, L + T): grows into the reserved columns
        for i, x in enumerate(ids):
            inp[i, L - len(x) :] = torch.tensor(x)
            att[i, L - len(x) : L] = 1
        pos = (att[:, :L].cumsum(-1) - 1).clamp(min=0)
        cache = StaticCache(config=model.config, max_cache_len=L + T)  # in-place updates, no per-step copies
        out = model(
            input_ids=inp,
            attention_mask=att[:, :L],
            position_ids=pos,
            **_cache_kw(model, cache),
            use_cache=True,
            cache_position=torch.arange(L),
        )
        logits, pos = out.logits[:, -1], pos[:, -1:]
        done = torch.zeros(B, dtype=torch.bool)
        gen = []
        for t in range(T):
            probs = torch.softmax(logits / self.temperature, dim=-1)
            nxt = torch.multinomial(probs, 1, generator=self.gen).squeeze(1)  # (B,)
            nxt = torch.where(done, torch.full_like(nxt, pad), nxt)
            gen.append(nxt)
            done |= nxt == tok.eos_token_id
            if bool(done.all()) or t == T - 1:
                break
            att[:, L + t] = 1
            pos = pos + 1
            out = model(
                input_ids=nxt.unsqueeze(1),
                attention_mask=att[:, : L + t + 1],
                position_ids=pos,
                **_cache_kw(model, cache),
                use_cache=True,
                cache_position=torch.tensor([L + t]),
            )
            logits = out.logits[:, -1]
        g = torch.stack(gen, dim=1).tolist()
        res = []
        for row in g:
            row = row[: row.index(tok.eos_token_id)] if tok.eos_token_id in row else row
            res.append(tok.decode([t for t in row if t != pad], skip_special_tokens=True))
        return res

    @classmethod
    def train(
        cls,
        pairs: Sequence[tuple[str, str]],
        seed: int = 0,
        steps: int = 300,
        batch_size: int = 32,
        lr: float = 3e-3,
        hidden: int = 128,
        layers: int = 2,
        heads: int = 4,
        vocab_size: int = 768,
        temperature: float = 0.8,
        max_new_tokens: int = 96,
    ) -> tuple[TinyLMGenerator, dict]:
        """Train a Llama-architecture LM from scratch on ``(prompt, target)`` pairs (loss on targets only).

        Returns the generator and training statistics (first/last loss). The tokenizer is a byte-level BPE
        trained on the pairs; everything is deterministic given ``seed``.
        """
        from iclr25.common.lm import tiny_causal_lm, train_bpe

        need_pairs("pairs", pairs)
        if not pairs:
            raise ValueError("pairs must hold at least one (prompt, target) pair")
        for name, v in (("steps", steps), ("batch_size", batch_size)):
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"{name} must be a positive int, got {v!r}")
        need_real("lr", lr, 0.0, lo_open=True)
        need_real("temperature", temperature, 0.0, lo_open=True)
        for name, v in (("hidden", hidden), ("layers", layers), ("heads", heads), ("vocab_size", vocab_size)):
            need_int(name, v, 1)
        need_int("max_new_tokens", max_new_tokens, 1)
        need_seed("seed", seed)
        if hidden % heads:
            raise ValueError(f"hidden must be divisible by heads, got hidden={hidden}, heads={heads}")
        tok = train_bpe([p + t for p, t in pairs], vocab_size=vocab_size)
        P = tok([p for p, _ in pairs], add_special_tokens=False)["input_ids"]
        T = tok([t for _, t in pairs], add_special_tokens=False)["input_ids"]
        seqs = [p + t + [tok.eos_token_id] for p, t in zip(P, T)]
        L = max(len(s) for s in seqs)
        ids = torch.full((len(seqs), L), tok.pad_token_id, dtype=torch.long)
        labels = torch.full((len(seqs), L), -100, dtype=torch.long)
        for i, (p, s) in enumerate(zip(P, seqs)):
            ids[i, : len(s)] = torch.tensor(s)
            labels[i, len(p) : len(s)] = torch.tensor(s[len(p) :])
        lengths = torch.tensor([len(s) for s in seqs])
        model = tiny_causal_lm(
            "llama",
            seed=seed,
            vocab_size=len(tok),
            hidden=hidden,
            layers=layers,
            heads=heads,
            max_positions=1024,
            attn_implementation="sdpa",
        )
        opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01, betas=(0.9, 0.98))
        g = torch.Generator().manual_seed(seed)
        warm = max(1, steps // 10)
        losses = []
        model.train()
        for step in range(steps):
            f = (
                (step + 1) / warm
                if step < warm
                else 0.5 * (1 + math.cos(math.pi * (step - warm) / max(1, steps - warm)))
            )
            for grp in opt.param_groups:
                grp["lr"] = lr * max(f, 0.05)
            b = torch.randint(0, len(seqs), (batch_size,), generator=g)
            ml = int(lengths[b].max())
            out = model(
                input_ids=ids[b, :ml],
                labels=labels[b, :ml],
                attention_mask=(ids[b, :ml] != tok.pad_token_id).long(),
            )
            opt.zero_grad(set_to_none=True)
            out.loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            losses.append(float(out.loss.detach()))
        k = max(1, steps // 10)
        stats = {
            "loss_first": float(np.mean(losses[:k])),
            "loss_last": float(np.mean(losses[-k:])),
            "params": sum(p.numel() for p in model.parameters()),
            "pairs": len(pairs),
        }
        return cls(model, tok, temperature=temperature, max_new_tokens=max_new_tokens, seed=seed), stats
