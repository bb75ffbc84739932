"""The ``real`` preset: passkey retrieval and streaming perplexity with SmolLM2-135M-Instruct (issue #52).

Passkey retrieval as the paper runs it (§4, following Mohtashami & Jaggi's landmark-attention prompt): an intro line,
the standard repetitive filler ("The grass is green. The sky is blue. …"), the needle "The pass key is K. Remember it.
K is the pass key." with a 5-digit key K stated in it, more filler, and "What is the pass key? The pass key is".
Prompt lengths and key distances are fixed by the config before the run; a seed draws the keys. The distance ``d`` is
the number of tokens from the needle's first token to the end of the prompt (the answer position).

Every method reads the same prompt through a cache of the same size ``S + N``:

* ``cascade`` — :class:`~iclr25.cascading_kv.cache.CascadingKVCache` with ``C`` cascades (strided prefill);
* ``streaming`` — the same cache with ``C = 1`` (StreamingLLM: ``S`` sinks + a window of ``N``);
* ``sliding`` — transformers' own sliding-window cache (``DynamicCache`` of ``DynamicSlidingWindowLayer`` s, window
  ``S + N``) on the model's weights loaded into its Mistral twin, with transformers' chunked prefill at the stride;
* ``full`` — full attention (``DynamicCache``), the reference and the precondition.

The filler before the needle is the same for every seed and key, so each method reads it once per run
(:func:`filler_snapshots`: one stream, its cache copied at every insertion point, which lies on a chunk boundary so
the chunks are those of the whole prompt read from scratch); each key then continues a copy. The answer is 7 greedy
tokens; a key counts as retrieved when the first digit run of the answer equals it. For every key and method the
run records which of the needle's digit tokens each layer × KV head still holds when the question is read
(:func:`digits_held`), so a miss is explained by eviction (the digits are gone) or by reading (they are held).

Streaming perplexity: a seed picks a held-out Shakespeare play (``split == "test"``) and a token offset; the window of
``ppl_tokens`` tokens (16K = twice SmolLM2's 8K trained context) is streamed through the cascade and through
StreamingLLM at the same cache size and stride, and every next-token loss is scored.
"""

from __future__ import annotations

import copy
import re
import time
from functools import lru_cache
from typing import TYPE_CHECKING

import numpy as np
import torch

from iclr25.common.claims import Claim, make_claim
from iclr25.common.progress import progress
from iclr25.common.results import values
from iclr25.common.seeding import derive_seed, torch_generator

from .cache import CascadingKVCache
from .streaming import strided_prefill

if TYPE_CHECKING:
    from .config import RealConfig

METHODS = ("cascade", "streaming", "sliding", "full")
INTRO = (
    "There is an important info hidden inside a lot of irrelevant text. Find it and memorize them. "
    "I will quiz you about the important information there."
)
FILLER = " The grass is green. The sky is blue. The sun is yellow. Here we go. There and back again."
NEEDLE = " The pass key is {key}. Remember it. {key} is the pass key."
QUESTION = " What is the pass key? The pass key is"
ANSWER_TOKENS = 7


# ----------------------------------------------------------------------------- model and caches
def load_model(cfg: RealConfig, device: torch.device):
    """``(model, tokenizer)`` through :func:`iclr25.assets.load_causal_lm` (an asset name, a folder or a hub id)."""
    from iclr25.assets import load_causal_lm

    return load_causal_lm(cfg.model_name, dtype=cfg.dtype, device=str(device))


def sliding_twin(model, window: int):
    """The Mistral model with ``model``'s (Llama) weights and ``sliding_window=window``: transformers' own sliding
    window (its cache keeps the last ``window − 1`` tokens and its mask the last ``window`` positions)."""
    from transformers import MistralConfig, MistralForCausalLM

    d = {k: v for k, v in model.config.to_dict().items() if k not in ("model_type", "architectures")}
    cfg = MistralConfig(**{**d, "sliding_window": int(window)})
    cfg._attn_implementation = "sdpa"
    p = next(model.parameters())
    twin = MistralForCausalLM(cfg).to(p.device, p.dtype)
    twin.load_state_dict(model.state_dict(), strict=True)
    return twin.eval()


class Runner:
    """The model (+ its sliding-window twin) and one fresh cache per method, fed chunk by chunk."""

    def __init__(self, cfg: RealConfig, model, tok) -> None:
        self.cfg, self.model, self.tok = cfg, model, tok
        self.twin = sliding_twin(model, cfg.sink_tokens + cfg.cache_size)
        self.device = next(model.parameters()).device

    def new_cache(self, method: str):
        from transformers import DynamicCache

        c = self.cfg
        if method in ("cascade", "streaming"):
            return CascadingKVCache(
                self.model, sink_tokens=c.sink_tokens, cache_size=c.cache_size,
                cascades=c.cascades if method == "cascade" else 1, beta=c.beta, head_reduction=c.head_reduction,
            )  # fmt: skip
        return DynamicCache(config=(self.twin if method == "sliding" else self.model).config)

    @torch.no_grad()
    def feed(self, method: str, cache, ids: torch.Tensor, logits: str = "last") -> torch.Tensor:
        """Feed ``ids`` ``(1, q)`` into ``cache`` in chunks of ``stride``; the last logits ``(1, V)`` or all ``(1, q, V)``."""
        ids = ids.to(self.device)
        if method in ("cascade", "streaming"):
            return strided_prefill(self.model, ids, cache, stride=self.cfg.stride, return_logits=logits)
        mdl = self.twin if method == "sliding" else self.model
        out = []
        for chunk in ids.split(self.cfg.stride, dim=1):  # transformers' chunked prefill (prefill_chunk_size)
            lg = mdl(
                input_ids=chunk, cache=cache, use_cache=True, logits_to_keep=0 if logits == "all" else 1
            ).logits
            out.append(lg if logits == "all" else lg[:, -1])
        return torch.cat(out, dim=1) if logits == "all" else out[-1]

    @torch.no_grad()
    def answer(self, method: str, cache, logits: torch.Tensor) -> list[int]:
        """:data:`ANSWER_TOKENS` greedy tokens after the prompt whose last logits are ``logits`` ``(1, V)``."""
        out = []
        for _ in range(ANSWER_TOKENS):
            nxt = int(logits[0].argmax())
            out.append(nxt)
            logits = self.feed(method, cache, torch.tensor([[nxt]]))
        return out


# ----------------------------------------------------------------------------- passkey prompts
@lru_cache(maxsize=8)
def _pieces(tok) -> dict[str, list[int]]:
    enc = lambda s: tok(s, add_special_tokens=False)["input_ids"]  # noqa: E731
    bos = [tok.bos_token_id] if tok.bos_token_id is not None else []
    return {"head": bos + enc(INTRO), "unit": enc(FILLER), "question": enc(QUESTION)}


def filler_stream(tok, n: int) -> list[int]:
    """The first ``n`` tokens of every prompt: BOS, the intro, then filler units (the same for every key)."""
    p = _pieces(tok)
    reps = max(0, n - len(p["head"])) // len(p["unit"]) + 2
    return (p["head"] + p["unit"] * reps)[:n]


def needle_tokens(tok, key: str) -> tuple[list[int], list[int]]:
    """The needle's tokens and the offsets (within it) of its digit tokens (the key is stated twice)."""
    ids = tok(NEEDLE.format(key=key), add_special_tokens=False)["input_ids"]
    digits = [i for i, t in enumerate(ids) if re.fullmatch(r"\s?\d+", tok.decode([t]))]
    return ids, digits


def prompt_rest(tok, cut: int, distance: int, key: str) -> tuple[list[int], int, list[int]]:
    """The tokens after the filler snapshot at ``cut``: the rest of the filler unit the cut falls in, the needle, whole
    filler units, the question. Returns ``(ids, actual distance, digit positions within ids)``; the actual distance
    (needle start → prompt end) is within half a filler unit of ``distance``."""
    p = _pieces(tok)
    unit = p["unit"]
    stream = filler_stream(tok, cut + len(unit) + 1)
    into = (cut - len(p["head"])) % len(unit)  # position of the cut inside its filler unit
    tail = stream[cut : cut + (len(unit) - into) % len(unit)]
    needle, digits = needle_tokens(tok, key)
    n_units = max(0, round((distance - len(needle) - len(p["question"])) / len(unit)))
    rest = tail + needle + unit * n_units + p["question"]
    return rest, len(rest) - len(tail), [len(tail) + i for i in digits]


def cuts(cfg: RealConfig) -> list[int]:
    """Every snapshot point ``L − d`` (a multiple of the stride), ascending."""
    return sorted({L - d for L in cfg.prompt_lengths for d in cfg.key_distances})


@torch.no_grad()
def filler_snapshots(cfg: RealConfig, runner: Runner) -> dict[str, dict[int, object]]:
    """``{method: {cut: cache after the first cut tokens}}``: one filler stream per method, copied at each cut.

    Full attention keeps one ``DynamicCache`` of the longest cut (cropped per key): its copies would be large."""
    pts = cuts(cfg)
    ids = torch.tensor([filler_stream(runner.tok, pts[-1])])
    snaps: dict[str, dict[int, object]] = {}
    for m in progress(METHODS, desc="filler"):
        cache, pos, snaps[m] = runner.new_cache(m), 0, {}
        for c in pts if m != "full" else full_cuts(cfg):
            if c > pos:
                runner.feed(m, cache, ids[:, pos:c])
                pos = c
            if m != "full":
                snaps[m][c] = copy.deepcopy(cache)
        if m == "full":
            snaps[m][pos] = cache
    return snaps


def full_cuts(cfg: RealConfig) -> list[int]:
    """The snapshot points of the prompts full attention reads (``L <= full_max_length``)."""
    return sorted({L - d for L in cfg.prompt_lengths if L <= cfg.full_max_length for d in cfg.key_distances})


def restore(method: str, snaps: dict, cut: int):
    if method == "full":
        (top,) = snaps["full"].values()
        c = copy.deepcopy(top)
        if c.get_seq_length() > cut:
            c.crop(cut - c.get_seq_length())  # transformers 5: a negative count of tokens to drop
        return c
    return copy.deepcopy(snaps[method][cut])


def digits_held(method: str, cache, cfg: RealConfig, positions: list[int], seen: int) -> tuple[float, float]:
    """Which digit tokens (absolute positions) the cache holds: ``(fraction of digit × layer × KV-head entries held,
    fraction of layer × KV heads holding all five digits of at least one statement of the key)``."""
    pos = torch.tensor(positions)
    if method in ("cascade", "streaming"):
        held = torch.stack([
            (cache.retained(li)[0][..., None] == pos).any(-2) for li in range(len(cache.layers))
        ])  # (layers, H_kv, digits)  # fmt: skip
    else:  # a DynamicCache (sliding-window layers keep their last tokens): held = among the last ``keep`` positions
        keep = cache.layers[0].keys.shape[-2]
        held = (pos >= seen - keep)[None, None].expand(1, 1, len(positions))
    h = held.reshape(-1, len(positions)).float()
    n = len(positions) // 2
    whole = torch.maximum(h[:, :n].prod(1), h[:, n:].prod(1)) if len(positions) % 2 == 0 else h.prod(1)
    return float(h.mean()), float(whole.mean())


def parse_answer(tok, ids: list[int]) -> str:
    m = re.search(r"\d+", tok.decode(ids))
    return m.group(0) if m else ""


# ----------------------------------------------------------------------------- perplexity
ID_COLUMNS = ("doc_id", "short_book_title", "title", "id")  # PG19 names its books by short_book_title


@lru_cache(maxsize=2)
def held_out_texts(corpus: str, split: str) -> tuple[tuple[str, str], ...]:
    """``((doc_id, text), …)`` of a corpus' held-out split, sorted by doc id: ``"shakespeare"`` from
    :func:`iclr25.assets.load_corpus` (rows whose ``split`` is ``split``), a local parquet file or a ``datasets``
    hub name (e.g. ``"deepmind/pg19"``, whose split ``split`` is read; a ``text`` column and one of
    :data:`ID_COLUMNS`)."""
    from pathlib import Path

    if corpus == "shakespeare":
        from iclr25.assets import load_corpus

        ds = load_corpus(corpus).filter(lambda r: r["split"] == split)
    else:
        import datasets

        p = Path(corpus).expanduser()
        ds = (datasets.load_dataset("parquet", data_files={split: str(p)}, split=split) if p.exists()
              else datasets.load_dataset(corpus, split=split))  # fmt: skip
    idc = next((c for c in ID_COLUMNS if c in ds.column_names), None)
    if "text" not in ds.column_names or idc is None:
        raise ValueError(
            f"ppl_corpus {corpus!r}: needs a 'text' column and one of {ID_COLUMNS}, has {ds.column_names}"
        )
    return tuple(sorted((str(r[idc]), r["text"]) for r in ds))


def ppl_window(cfg: RealConfig, tok, seed: int) -> tuple[str, int, torch.Tensor]:
    """The seed's held-out text (round robin from ``seed mod n``, skipping texts with <= ``ppl_tokens`` tokens) and a
    random offset in it: ``(doc_id, offset, ids)``."""
    texts = held_out_texts(cfg.ppl_corpus, cfg.ppl_split)
    for k in range(len(texts)):
        doc, text = texts[(seed + k) % len(texts)]
        ids = tok(text, add_special_tokens=False)["input_ids"]
        if len(ids) > cfg.ppl_tokens:
            break
    else:
        raise ValueError(
            f"ppl_tokens: no held-out text of {cfg.ppl_corpus!r} has more than {cfg.ppl_tokens} tokens"
        )
    g = torch_generator(derive_seed(seed, "ppl_offset"))
    off = int(torch.randint(0, len(ids) - cfg.ppl_tokens + 1, (1,), generator=g))
    return doc, off, torch.tensor([ids[off : off + cfg.ppl_tokens]])


@torch.no_grad()
def stream_nll(runner: Runner, method: str, ids: torch.Tensor, beyond: int) -> dict[str, float]:
    """Streaming next-token loss over ``ids``: perplexity of every token and of the tokens after position ``beyond``."""
    cache, nll = runner.new_cache(method), []
    for c0 in range(0, ids.shape[1], runner.cfg.stride):
        chunk = ids[:, c0 : c0 + runner.cfg.stride]
        lg = runner.feed(method, cache, chunk, logits="all")[0].float()
        nll.append(torch.nn.functional.log_softmax(lg, -1))
        nxt = ids[0, c0 + 1 : c0 + 1 + chunk.shape[1]]
        nll[-1] = -nll[-1][: len(nxt)].gather(1, nxt[:, None].to(lg.device))[:, 0].cpu()
    v = torch.cat(nll).double()
    return {"ppl": float(v.mean().exp()), "ppl_beyond": float(v[beyond:].mean().exp())}


# ----------------------------------------------------------------------------- one seed
def one_seed(cfg: RealConfig, seed: int, runner: Runner, snaps: dict) -> dict:
    tok = runner.tok
    g = torch_generator(derive_seed(seed, "passkeys"))
    res: dict = {m: {} for m in METHODS}
    keys_log = []
    t0 = time.process_time()
    trials = [
        (L, d, k) for L in cfg.prompt_lengths for d in cfg.key_distances for k in range(cfg.keys_per_point)
    ]
    for L, d, _k in progress(trials, desc=f"passkey seed {seed}"):
        key = "".join(str(int(x)) for x in torch.randint(0, 10, (5,), generator=g))
        key = str(int(torch.randint(1, 10, (1,), generator=g))) + key[1:]  # no leading zero
        cut = L - d
        rest, dist, dpos = prompt_rest(tok, cut, d, key)
        row = {"L": L, "d": d, "length": cut + len(rest), "distance": dist, "key": key}
        for m in METHODS:
            if m == "full" and L > cfg.full_max_length:
                continue
            cache = restore(m, snaps, cut)
            logits = runner.feed(m, cache, torch.tensor([rest]))
            held, whole = digits_held(m, cache, cfg, [cut + p for p in dpos], cut + len(rest))
            got = parse_answer(tok, runner.answer(m, cache, logits))
            row[m] = {"answer": got, "ok": got == key, "digits_held": held, "key_held": whole}
        keys_log.append(row)
    res["keys"] = keys_log
    N = cfg.cache_size
    for m in METHODS:
        for L in cfg.prompt_lengths:
            for d in cfg.key_distances:
                oks = [r[m]["ok"] for r in keys_log if m in r and (r["L"], r["d"]) == (L, d)]
                if oks:
                    res[m][f"acc_L{L}_d{d}"] = float(np.mean(oks))
        for part, ds in (("inside", [d for d in cfg.key_distances if d < N]),
                         ("beyond", [d for d in cfg.key_distances if N < d < cfg.span_limit])):  # fmt: skip
            rows = [r[m] for r in keys_log if m in r and r["d"] in ds]
            res[m][f"acc_{part}"] = float(np.mean([r["ok"] for r in rows]))
            res[m][f"digits_held_{part}"] = float(np.mean([r["digits_held"] for r in rows]))
            res[m][f"key_held_{part}"] = float(np.mean([r["key_held"] for r in rows]))
        res[m]["acc_all"] = float(np.mean([r[m]["ok"] for r in keys_log if m in r]))
    res["passkey_cpu_s"] = time.process_time() - t0
    # streaming perplexity
    t0 = time.process_time()
    doc, off, ids = ppl_window(cfg, tok, seed)
    res["ppl_text"] = {"doc_id": doc, "offset": off, "tokens": int(ids.shape[1])}
    for m in ("cascade", "streaming"):
        res[m].update(stream_nll(runner, m, ids, cfg.ppl_beyond))
    res["ppl_cpu_s"] = time.process_time() - t0
    return res


# ----------------------------------------------------------------------------- claims
def required_keys(cfg: RealConfig) -> tuple[str, ...]:
    return tuple(f"{m}/acc_{p}" for m in METHODS for p in ("inside", "beyond")) + (
        "cascade/ppl",
        "streaming/ppl",
    )


def precondition(cfg: RealConfig, per_seed: dict) -> str:
    """Why the run is invalid, or ``""``: full attention must retrieve the key (>= ``valid_min_acc``) at every prompt
    length it runs."""
    for L in [L for L in cfg.prompt_lengths if L <= cfg.full_max_length]:
        acc = np.mean(
            [np.mean([per_seed[s]["full"][f"acc_L{L}_d{d}"] for d in cfg.key_distances]) for s in per_seed]
        )
        if acc < cfg.valid_min_acc:
            return (
                f"full attention retrieves only {acc:.3f} < {cfg.valid_min_acc} of the keys at prompt length {L}: "
                "the model cannot do the task, so the caches' comparison is not meaningful"
            )
    return ""


def claims(cfg: RealConfig, per_seed: dict) -> list[Claim]:
    def v(k: str) -> list[float]:
        return values(per_seed, k)

    N, span = cfg.cache_size, cfg.span_limit
    inside = [d for d in cfg.key_distances if d < N]
    beyond = [d for d in cfg.key_distances if N < d < span]
    held = (
        f"Digits held at answer time (fraction of digit × layer × KV-head entries; layer × KV heads holding a whole "
        f"key): cascade {np.mean(v('cascade/digits_held_beyond')):.2f} / {np.mean(v('cascade/key_held_beyond')):.2f}, "
        f"StreamingLLM {np.mean(v('streaming/digits_held_beyond')):.2f} / "
        f"{np.mean(v('streaming/key_held_beyond')):.2f} beyond the window; inside it cascade "
        f"{np.mean(v('cascade/digits_held_inside')):.2f} / {np.mean(v('cascade/key_held_inside')):.2f}."
    )
    out = [
        make_claim(
            "real_beyond_window",
            f"For keys beyond the cache (d in {beyond}, N = {N}) but within the cascade's span W·(2^C−1) = {span}, "
            "the cascade's passkey accuracy exceeds StreamingLLM's by >= 0.25 (paired per seed).",
            "acc_beyond",
            method=v("cascade/acc_beyond"),
            baseline=v("streaming/acc_beyond"),
            threshold=0.25,
            direction=">=",
            compare="difference",
            note=held,
        ),
        make_claim(
            "real_window_parity",
            f"For keys inside the window (d in {inside} < N = {N}) the cascade reaches >= 0.9 × full attention's "
            "passkey accuracy.",
            "acc_inside",
            method=v("cascade/acc_inside"),
            baseline=v("full/acc_inside"),
            threshold=0.9,
            direction=">=",
            compare="ratio",
            note=held,
        ),
        make_claim(
            "real_ppl",
            f"Streaming perplexity on {cfg.ppl_tokens} held-out Shakespeare tokens: cascade <= StreamingLLM at the same "
            f"cache size (S + N = {cfg.sink_tokens} + {N}), paired per seed.",
            "ppl",
            method=v("cascade/ppl"),
            baseline=v("streaming/ppl"),
            threshold=1.0,
            direction="<=",
            compare="ratio",
        ),
    ]
    for L in [L for L in cfg.prompt_lengths if L <= cfg.full_max_length]:
        accs = [
            float(np.mean([per_seed[s]["full"][f"acc_L{L}_d{d}"] for d in cfg.key_distances]))
            for s in per_seed
        ]
        out.append(
            make_claim(
                "real_precondition",
                f"Full attention retrieves the key at prompt length {L} (accuracy >= {cfg.valid_min_acc}).",
                f"full/acc_L{L}",
                method=accs,
                threshold=cfg.valid_min_acc,
                direction=">=",
                check=f"precondition: full attention >= {cfg.valid_min_acc} at L = {L}; below it the run is invalid",
            )
        )
    return out


# ----------------------------------------------------------------------------- report
def report_md(cfg: RealConfig, per_seed: dict) -> str:
    """Per-seed passkey accuracy (inside / beyond the window), digits held at answer time, and perplexities."""
    N = cfg.cache_size
    lines = [
        f"## Real preset: {cfg.model_name}, S + N = {cfg.sink_tokens} + {N} for every cache (cascade C = "
        f"{cfg.cascades}, W = {cfg.window}, span {cfg.span_limit}), stride {cfg.stride}, β = {cfg.beta}",
        "",
        f"Passkey: prompt lengths {list(cfg.prompt_lengths)}, distances {list(cfg.key_distances)} "
        f"({cfg.keys_per_point} key per length × distance and seed). Accuracy inside (d < N) / beyond (N < d < span); "
        "held = fraction of digit × layer × KV-head entries still cached / layer × KV heads holding a whole key.",
        "",
        "| seed | method | acc inside | acc beyond | held inside | held beyond | whole key beyond | ppl | ppl after "
        f"{cfg.ppl_beyond} |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for s, r in per_seed.items():
        for m in METHODS:
            x = r[m]
            ppl = f"{x['ppl']:.3f} | {x['ppl_beyond']:.3f}" if "ppl" in x else "— | —"
            lines.append(
                f"| {s} | {m} | {x['acc_inside']:.2f} | {x['acc_beyond']:.2f} | {x['digits_held_inside']:.2f} | "
                f"{x['digits_held_beyond']:.2f} | {x['key_held_beyond']:.2f} | {ppl} |"
            )
    lines += ["", "Every key (answer given by each method; ✓ = retrieved):", "",
              "| seed | L | d | key | " + " | ".join(METHODS) + " |", "|---|---|---|---|" + "---|" * len(METHODS)]  # fmt: skip
    for s, r in per_seed.items():
        for k in r["keys"]:
            cells = [
                (
                    f"{k[m]['answer'] or '—'} {'✓' if k[m]['ok'] else '✗'} ({k[m]['digits_held']:.2f})"
                    if m in k
                    else "—"
                )
                for m in METHODS
            ]
            lines.append(
                f"| {s} | {k['length']} | {k['distance']} | {k['key']} | " + " | ".join(cells) + " |"
            )
    lines += ["", "Perplexity windows: " + "; ".join(
        f"seed {s}: {r['ppl_text']['doc_id']} from token {r['ppl_text']['offset']} ({r['ppl_text']['tokens']} tokens)"
        for s, r in per_seed.items()) + "."]  # fmt: skip
    return "\n".join(lines) + "\n"


def prepare(cfg: RealConfig, device: torch.device) -> tuple[Runner, dict]:
    """Load the model and read the filler once per method (``(runner, snaps)`` for :func:`one_seed`), and the
    held-out texts, once per run before the seeds (forked workers inherit all of it)."""
    model, tok = load_model(cfg, device)
    runner = Runner(cfg, model, tok)
    snaps = filler_snapshots(cfg, runner)
    held_out_texts(cfg.ppl_corpus, cfg.ppl_split)  # read once, before the workers fork
    return runner, snaps
