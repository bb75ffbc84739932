"""The MLP output projections as key→value memories (paper §3, following MEMIT): locating ``W_out`` in any
supported Hugging Face decoder, reading keys (inputs of ``W_out``) and residual outputs at the subject's last
token, and the fact batches those reads run on.

``W_out`` is always exposed in the paper's orientation ``W ∈ R^{d × d_k}`` (value = W k), whatever the module
stores: ``nn.Linear`` keeps ``(d, d_k)``, GPT-2's ``Conv1D`` keeps ``(d_k, d)``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from .facts import Fact

# Families whose W_out the structural locator was checked on (tests/law: tiny models from each family's config).
# Any other decoder works when the locator finds exactly one W_out per block; nothing here is looked up by name.
ARCHITECTURES: tuple[str, ...] = ("gemma2", "gpt2", "gptj", "llama", "mistral", "olmo2", "qwen2", "qwen3")


def _text_config(model):
    cfg = getattr(model, "config", None)
    if cfg is None or not hasattr(cfg, "to_dict"):
        raise ValueError(
            f"model must be a Hugging Face decoder-only LM with a .config, got {type(model).__name__}"
        )
    return cfg.get_text_config() if hasattr(cfg, "get_text_config") else cfg


def _first(cfg, *names):
    for n in names:
        v = getattr(cfg, n, None)
        if isinstance(v, int) and not isinstance(v, bool) and v > 0:
            return v
    return None


def _linear_dims(m: torch.nn.Module) -> tuple[int, int, bool] | None:
    """(in, out, stored transposed) of an ``nn.Linear`` (incl. subclasses) or GPT-2 ``Conv1D``; None otherwise."""
    if isinstance(m, torch.nn.Linear):
        return m.in_features, m.out_features, False
    if type(m).__name__ == "Conv1D" and getattr(getattr(m, "weight", None), "ndim", 0) == 2:
        return int(m.weight.shape[0]), int(m.weight.shape[1]), True  # Conv1D stores (in, out)
    return None


def _model_type(model) -> str:
    return str(getattr(_text_config(model), "model_type", None) or type(model).__name__)


def _blocks(model) -> tuple[str, torch.nn.ModuleList]:
    """The decoder's block list: the one ``nn.ModuleList`` of ``num_hidden_layers`` blocks of one class."""
    cfg = _text_config(model)
    L = _first(cfg, "num_hidden_layers", "n_layer", "num_layers")
    if L is None:
        raise ValueError(
            f"cannot locate the blocks of this {_model_type(model)} model: its config has no num_hidden_layers"
        )
    found = [
        (name, m)
        for name, m in model.named_modules()
        if isinstance(m, torch.nn.ModuleList) and len(m) == L and len({type(b) for b in m}) == 1
    ]
    if len(found) != 1:
        what = "none" if not found else ", ".join(repr(n) for n, _ in found)
        raise ValueError(
            f"cannot locate the decoder blocks of this {_model_type(model)} model: expected exactly one "
            f"nn.ModuleList of {L} (config.num_hidden_layers) blocks of one class, found {what}"
        )
    return found[0]


def _w_out(model, block: torch.nn.Module, block_name: str) -> tuple[str, bool]:
    """(path inside the block, stored transposed) of the block's MLP output projection W_out.

    By structure: the one Linear / Conv1D of the block mapping the MLP width d_ff (config ``intermediate_size`` /
    ``n_inner`` / …, GPT-2 and GPT-J's default 4d) to the hidden size d. Zero or several such modules (a mixture of
    experts, an extra projection) are refused, naming what was found.
    """
    cfg = _text_config(model)
    d = _first(cfg, "hidden_size", "n_embd", "d_model")
    d_ff = _first(cfg, "intermediate_size", "n_inner", "ffn_dim", "ffn_hidden_size")
    if d_ff is None and d is not None and getattr(cfg, "model_type", None) in ("gpt2", "gptj"):
        d_ff = 4 * d  # GPT2Config / GPTJConfig: n_inner=None means 4·n_embd
    if d is None:
        raise ValueError(
            f"cannot locate W_out in this {_model_type(model)} model: its config has no hidden_size"
        )
    to_d = []
    for name, m in block.named_modules():
        dims = _linear_dims(m)
        if dims is not None and dims[1] == d and dims[0] != d:
            to_d.append((name, dims))
    cands = [(n, dims) for n, dims in to_d if d_ff is None or dims[0] == d_ff]
    if len(cands) != 1:
        listed = ", ".join(f"{block_name}.{n} ({dims[0]}→{dims[1]})" for n, dims in to_d) or "none"
        raise ValueError(
            f"cannot locate the MLP output projection W_out of this {_model_type(model)} model: LaW needs exactly "
            f"one Linear/Conv1D in block {block_name} mapping the MLP width d_ff={d_ff} to the hidden size d={d}, "
            f"found {len(cands)} (modules into d: {listed}); mixture-of-experts blocks are not supported"
        )
    return cands[0][0], cands[0][1][2]


def n_layers(model) -> int:
    return len(_blocks(model)[1])


class _Stop(Exception):
    """Raised by a hook to end a probe forward pass once the block of interest has run."""


def _run_until(model, ids: torch.Tensor, block: torch.nn.Module, hooks: list) -> torch.Tensor:
    """Forward ``ids`` with ``hooks`` ((module, kind, fn), kind ∈ {"pre", "post"}) until ``block`` has run;
    returns the block's output hidden state."""
    got: dict = {}

    def stop(m, a, o):
        got["h"] = _hidden(o)
        raise _Stop

    handles = [block.register_forward_hook(stop)]
    try:
        for mod, kind, fn in hooks:
            reg = mod.register_forward_pre_hook if kind == "pre" else mod.register_forward_hook
            handles.append(reg(fn))
        try:
            model(input_ids=ids)
        except _Stop:
            pass
    finally:
        for h in handles:
            h.remove()
    return got["h"]


def _rel(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a.double() - b.double()).norm() / b.double().norm().clamp_min(1e-30))


@torch.no_grad()
def _post_norms(model, layers: list[tuple[int, torch.nn.Module, torch.nn.Module, str]]) -> dict:
    """Per layer, how W_out's value v enters the residual stream, measured on a 6-token probe input.

    Adds a large perturbation u to v and compares the block output's change with u: equal (pre-norm blocks: Llama,
    Qwen, Mistral, GPT-2, GPT-J) → ``None``; otherwise the one block module whose input *is* v (a post-MLP norm:
    Gemma2's / OLMo2's ``post_feedforward_layernorm``) must explain the change as N(v + u) − N(v) → ``(name, N)``;
    anything else is refused by name.
    """
    p = next(model.parameters())
    tol = 0.05 if p.dtype in (torch.float32, torch.float64) else 0.3  # bf16/fp16 rounding of the residual
    emb = model.get_input_embeddings() if hasattr(model, "get_input_embeddings") else None
    vocab = int(emb.weight.shape[0]) if emb is not None else 7
    ids = (torch.arange(1, 7, device=p.device) % vocab)[None]  # (1, 6): any valid ids
    # restored per module afterwards, so mixed train/eval states survive
    modes = [(m, m.training) for m in model.modules()]
    model.eval()
    out: dict = {}
    try:
        for idx, w_out, block, name in layers:
            rec: dict = {}
            users: dict[int, tuple[str, torch.nn.Module]] = {}

            def keep_v(m, a, o, rec=rec):
                rec["v"] = o

            def user(m, a, sub_name, rec=rec, users=users):
                if a and a[0] is rec.get("v"):
                    users[id(m)] = (sub_name, m)

            subs = [(n, m) for n, m in block.named_modules() if m is not block and m is not w_out]
            hooks = [(w_out, "post", keep_v)] + [
                (m, "pre", lambda mod, a, n=n: user(mod, a, n)) for n, m in subs
            ]
            h = _run_until(model, ids, block, hooks)
            v = rec["v"]
            scale = 10.0 * (float(v.float().abs().max()) + float(h.float().abs().max()) + 1.0)
            g = torch.Generator(device="cpu").manual_seed(0)
            u = (torch.randn(v.shape, generator=g) * scale).to(v.device, v.dtype)
            dh = _run_until(model, ids, block, [(w_out, "post", lambda m, a, o, u=u: o + u)]) - h
            if _rel(dh, u) < tol:
                out[idx] = None
                continue
            if len(users) == 1:
                nname, norm = next(iter(users.values()))
                if _rel(dh, norm(v + u) - norm(v)) < tol:
                    out[idx] = (nname, norm)
                    continue
            raise ValueError(
                f"the output of {name} does not enter its block's residual stream additively (changing it by u "
                f"changes the block output by something {_rel(dh, u):.2f}·‖u‖ away from u) and no single module "
                f"applied to it explains the change (modules reading it: {sorted(n for n, _ in users.values())}); "
                "LaW / MEMIT need W_out's value added to the residual (pre-norm blocks) or normalised by one module "
                "and then added (Gemma2 / OLMo2 post-norm blocks)"
            )
    finally:
        for m, mode in modes:
            m.training = mode
    return out


@dataclass(frozen=True)
class MemoryLayer:
    """One edited layer: its index, the ``W_out`` module (and its dotted name) and the enclosing block.

    ``post_norm``: the module that normalises W_out's value before it joins the residual stream (Gemma2 / OLMo2
    ``post_feedforward_layernorm``), None in pre-norm blocks where the value is added as is.
    """

    index: int
    name: str
    module: torch.nn.Module
    block: torch.nn.Module
    transposed: bool  # weight stored as (d_k, d) (GPT-2 Conv1D)
    post_norm: torch.nn.Module | None = None
    post_norm_name: str | None = None

    @property
    def W(self) -> torch.Tensor:
        """``W_out`` as a (d, d_k) view of the live parameter."""
        w = self.module.weight
        return w.t() if self.transposed else w

    @property
    def d_in(self) -> int:
        return self.W.shape[1]

    @property
    def d_out(self) -> int:
        return self.W.shape[0]

    @torch.no_grad()
    def add_(self, delta: torch.Tensor, check_precision: bool = True) -> None:
        """``W ← W + Δ`` with ``Δ`` of shape (d, d_k), in place, in the parameter's dtype.

        In a low-precision dtype (bf16 / fp16) the stored change is ``round(W + Δ) − W``; if that loses more than 1 %
        of ‖Δ‖ a ``UserWarning`` names the layer and the dtype (load the model in float32 for an exact edit)."""
        if tuple(delta.shape) != (self.d_out, self.d_in):
            raise ValueError(
                f"delta for {self.name} must have shape {(self.d_out, self.d_in)}, got {tuple(delta.shape)}"
            )
        W = self.W
        low = check_precision and W.dtype in (torch.bfloat16, torch.float16)
        before = W.double() if low else None
        W.add_(delta.to(device=W.device, dtype=W.dtype))
        if low:
            d = delta.to(device=W.device, dtype=torch.float64)
            err = float((W.double() - before - d).norm() / d.norm().clamp_min(1e-300))
            if err > 0.01:
                import warnings

                warnings.warn(
                    f"the edit of {self.name} is stored in {W.dtype}: rounding changes {err:.1%} of Δ (‖applied − Δ‖ / "
                    "‖Δ‖); load the model in float32 for an exact edit",
                    stacklevel=3,
                )


def resolve_layers(model, layers: Sequence[int | str]) -> list[MemoryLayer]:
    """``MemoryLayer``s for layer indices (``[3, 4]``) or full ``W_out`` module names
    (``"model.layers.3.mlp.down_proj"``). Unknown names and out-of-range indices raise ``ValueError``.

    ``W_out`` is located by structure (:func:`_w_out`: the block's one d_ff → d projection), so any decoder whose
    blocks have one MLP output projection works; how its value joins the residual stream is measured once per call
    on a 6-token probe (pre-norm: added; Gemma2 / OLMo2: through ``post_feedforward_layernorm``)."""
    mt = _model_type(model)
    blocks_name, blocks = _blocks(model)
    if isinstance(layers, (int, str)):
        layers = [layers]
    layers = list(layers)
    if not layers:
        raise ValueError("layers must name at least one layer, got an empty list")
    L = len(blocks)
    sub, transposed = _w_out(model, blocks[0], f"{blocks_name}.0")
    out: list[tuple[int, str]] = []
    for spec in layers:
        if isinstance(spec, bool) or not isinstance(spec, (int, str)):
            raise ValueError(f"layers entries must be ints or module names, got {spec!r}")
        if isinstance(spec, str):
            idx = next((i for i in range(L) if f"{blocks_name}.{i}.{sub}" == spec), None)
            if idx is None:
                raise ValueError(
                    f"layer name {spec!r} is not an MLP output projection of this {mt} model; expected "
                    f"{blocks_name}.<i>.{sub} with i in [0, {L})"
                )
        else:
            idx = int(spec)
            if not 0 <= idx < L:
                raise ValueError(f"layer index {spec} out of range: the model has {L} layers")
        out.append((idx, f"{blocks_name}.{idx}.{sub}"))
    idxs = [i for i, _ in out]
    if len(set(idxs)) != len(idxs):
        raise ValueError(f"layers must be distinct, got {layers!r}")
    named = dict(model.named_modules())
    for i, _ in out:  # every edited block has W_out at the same place (refused by name otherwise)
        if _w_out(model, blocks[i], f"{blocks_name}.{i}") != (sub, transposed):
            raise ValueError(f"block {blocks_name}.{i} does not hold its MLP output projection at {sub!r}")
    for _, n in out:
        w = getattr(named[n], "weight", None)
        if not isinstance(w, torch.Tensor) or not w.is_floating_point():
            raise ValueError(
                f"{n} stores a quantised weight ({getattr(w, 'dtype', type(w).__name__)}); LaW adds a dense Δ to W_out: "
                "load the model unquantised (float32 for an exact edit, or bf16 / fp16)"
            )
    norms = _post_norms(model, [(i, named[n], blocks[i], n) for i, n in out])
    res = []
    for i, n in out:
        pn = norms[i]
        res.append(
            MemoryLayer(
                i,
                n,
                named[n],
                blocks[i],
                transposed,
                None if pn is None else pn[1],
                None if pn is None else f"{blocks_name}.{i}.{pn[0]}",
            )  # fmt: skip
        )
    return sorted(res, key=lambda m: m.index)


def model_fingerprint(model) -> str:
    """A cheap content hash of a model: config plus, per parameter, its shape, sum and first values."""
    import hashlib

    h = hashlib.sha256()
    h.update(model.config.to_json_string(use_diff=False).encode())
    with torch.no_grad():
        for name, p in model.named_parameters():
            flat = p.detach().reshape(-1)
            h.update(name.encode())
            h.update(str(tuple(p.shape)).encode())
            h.update(flat.double().sum().cpu().numpy().tobytes())
            h.update(flat[:64].double().cpu().numpy().tobytes())
    return h.hexdigest()[:16]


# -- fact batches ------------------------------------------------------------------------------------------


@dataclass
class FactBatch:
    """Right-padded token batch of ``len(facts) × len(templates)`` rows (fact-major).

    ``subject_pos[r]``: index of the subject's last token; ``prompt_len[r]``: number of prompt tokens;
    ``target_mask[r, t]``: True where ``input_ids[r, t]`` is a target token (so logits at t−1 predict it).
    """

    input_ids: torch.Tensor  # (R, L)
    attention_mask: torch.Tensor  # (R, L)
    subject_pos: torch.Tensor  # (R,)
    prompt_len: torch.Tensor  # (R,)
    target_mask: torch.Tensor  # (R, L) bool
    n_facts: int
    n_templates: int

    def to(self, device) -> FactBatch:
        for k in ("input_ids", "attention_mask", "subject_pos", "prompt_len", "target_mask"):
            setattr(self, k, getattr(self, k).to(device))
        return self


def _max_len(model) -> int | None:
    cfg = model.config
    return getattr(cfg, "max_position_embeddings", None) or getattr(cfg, "n_positions", None)


def encode_facts(
    tokenizer,
    facts: Sequence[Fact],
    templates: Sequence[str] = ("{}",),
    target: str | Sequence[int] | None = "answer",
    max_len: int | None = None,
) -> FactBatch:
    """Tokenise ``template.format(prompt) + target`` for every fact and template.

    ``target``: ``"answer"`` = each fact's own ``target``; ``None`` = no target tokens; a string = the same
    target for all facts (e.g. ``" <|endoftext|>"``); a list of ids = those tokens (e.g. ``[eos_id]``).
    """
    if not facts:
        raise ValueError("facts must hold at least one Fact, got an empty list")
    for t in templates:
        if t.count("{}") != 1:
            raise ValueError(f"templates: a context template must contain exactly one '{{}}', got {t!r}")
    texts, prefixes = [], []
    for f in facts:
        for t in templates:
            pre = t[: t.index("{}")]
            texts.append(t.format(f.prompt))
            prefixes.append(pre + f.prompt[: f.subject_end])
    p_ids = tokenizer(texts, add_special_tokens=True)["input_ids"]
    s_len = [len(x) for x in tokenizer(prefixes, add_special_tokens=True)["input_ids"]]
    if target == "answer":
        tg = tokenizer([f.target for f in facts for _ in templates], add_special_tokens=False)["input_ids"]
    elif target is None:
        tg = [[] for _ in texts]
    elif isinstance(target, str):
        ids = tokenizer(target, add_special_tokens=False)["input_ids"]
        tg = [ids for _ in texts]
    else:
        tg = [[int(i) for i in target] for _ in texts]
    rows = [p + t for p, t in zip(p_ids, tg)]
    L = max(len(r) for r in rows)
    for i, (p, t, sl) in enumerate(zip(p_ids, tg, s_len)):
        if target is not None and not t:
            raise ValueError(f"fact {facts[i // len(templates)]!r}: target tokenises to no tokens")
        if not 1 <= sl <= len(p):
            raise ValueError(f"fact {facts[i // len(templates)]!r}: cannot locate the subject's last token")
        if max_len is not None and len(p) + len(t) > max_len:
            raise ValueError(
                f"fact {facts[i // len(templates)]!r} is {len(p) + len(t)} tokens long, longer than the "
                f"model's context ({max_len})"
            )
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    R = len(rows)
    ids = torch.full((R, L), pad, dtype=torch.long)
    am = torch.zeros((R, L), dtype=torch.long)
    tm = torch.zeros((R, L), dtype=torch.bool)
    for r, (row, p) in enumerate(zip(rows, p_ids)):
        ids[r, : len(row)] = torch.tensor(row)
        am[r, : len(row)] = 1
        tm[r, len(p) : len(row)] = True
    return FactBatch(
        ids,
        am,
        torch.tensor(s_len) - 1,
        torch.tensor([len(p) for p in p_ids]),
        tm,
        len(facts),
        len(templates),
    )


def length_groups(lengths: torch.Tensor, max_rows: int | None = None) -> list[torch.Tensor]:
    """Indices into ``lengths`` grouped by equal length (shortest first, ascending index inside a group), each group
    split into chunks of at most ``max_rows``. A right-padded batch run group by group, each group cut to its own
    length, computes no padded position (the fact batches here are ~40 % padding)."""
    if lengths.ndim != 1:
        raise ValueError(f"lengths must be 1-D, got shape {tuple(lengths.shape)}")
    if max_rows is not None and max_rows < 1:
        raise ValueError(f"max_rows must be >= 1 or None, got {max_rows!r}")
    order = torch.argsort(lengths, stable=True)
    vals, counts = torch.unique_consecutive(lengths[order], return_counts=True)
    out = []
    for g in torch.split(order, counts.tolist()):
        out += list(torch.split(g, max_rows)) if max_rows else [g]
    return out


_KEEP: dict[type, bool] = {}


def logits_at(model, input_ids: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
    """Logits ``(R, P, V)`` of an unpadded batch at the sequence ``positions`` (1-D, the same for every row) only.

    Uses transformers' ``logits_to_keep`` where the model's ``forward`` takes it (the LM head then projects only
    those positions: ~20 % of a small LM's forward FLOPs and the full-vocabulary softmax of every other position are
    skipped); otherwise the full logits are computed and indexed. Same logits either way."""
    cls = type(model)
    if cls not in _KEEP:
        import inspect

        try:
            _KEEP[cls] = "logits_to_keep" in inspect.signature(model.forward).parameters
        except (TypeError, ValueError):
            _KEEP[cls] = False
    kw = {"logits_to_keep": positions} if _KEEP[cls] else {}
    lg = model(input_ids=input_ids, **kw).logits
    if lg.shape[1] != positions.numel():  # the model ignored logits_to_keep (e.g. a **kwargs wrapper)
        lg = lg[:, positions]
    return lg


def encode_for(model, tokenizer, facts, templates=("{}",), target="answer") -> FactBatch:
    dev = next(model.parameters()).device
    return encode_facts(tokenizer, facts, templates, target, max_len=_max_len(model)).to(dev)


# -- reading keys and residuals ----------------------------------------------------------------------------


def _hidden(o):
    return o[0] if isinstance(o, tuple) else o


@contextlib.contextmanager
def capture(layers: Sequence[MemoryLayer], positions: torch.Tensor, keys: bool = True, resid: bool = False):
    """Record, per layer, the ``W_out`` input (``keys``) and/or the block output (``resid``) at one position per
    row (``positions``: (R,)). Yields a dict ``{("k"|"h", layer_index): (R, dim) tensor}``."""
    store: dict = {}
    handles = []
    rows = torch.arange(positions.numel(), device=positions.device)
    try:
        for m in layers:
            if keys:

                def pre(mod, args, _i=m.index):
                    store[("k", _i)] = args[0][rows, positions]

                handles.append(m.module.register_forward_pre_hook(pre))
            if resid:

                def post(mod, args, out, _i=m.index):
                    store[("h", _i)] = _hidden(out)[rows, positions]

                handles.append(m.block.register_forward_hook(post))
        yield store
    finally:
        for h in handles:
            h.remove()


@contextlib.contextmanager
def capture_values(layer: MemoryLayer, positions: torch.Tensor):
    """Record ``W_out``'s output (the value v = W k) at one position per row. Yields ``{"v": (R, d)}``."""
    store: dict = {}
    rows = torch.arange(positions.numel(), device=positions.device)

    def post(mod, args, out):
        store["v"] = out[rows, positions]

    handle = layer.module.register_forward_hook(post)
    try:
        yield store
    finally:
        handle.remove()


@contextlib.contextmanager
def add_to_block_output(block: torch.nn.Module, positions: torch.Tensor, delta: torch.Tensor):
    """Add ``delta[r]`` to block's output hidden state at ``positions[r]`` of row r (MEMIT's δ injection)."""
    rows = torch.arange(positions.numel(), device=positions.device)

    def post(mod, args, out):
        h = _hidden(out)
        add = torch.zeros_like(h)
        add[rows, positions] = delta.to(h.dtype)
        h2 = h + add
        return (h2,) + tuple(out[1:]) if isinstance(out, tuple) else h2

    handle = block.register_forward_hook(post)
    try:
        yield
    finally:
        handle.remove()


def _mean_over_templates(x: torch.Tensor, batch: FactBatch) -> torch.Tensor:
    return x.reshape(batch.n_facts, batch.n_templates, -1).mean(1)


def _forward_until(
    model, input_ids: torch.Tensor, attention_mask: torch.Tensor, block: torch.nn.Module
) -> None:
    """Run the model on a batch only until ``block`` has run (the reads of keys, block outputs and values at or
    below that block are the same as in a full forward pass; the later blocks and the LM head are skipped)."""

    def stop(m, a, o):
        raise _Stop

    h = block.register_forward_hook(stop)
    try:
        model(input_ids=input_ids, attention_mask=attention_mask)
    except _Stop:
        pass
    finally:
        h.remove()


@torch.no_grad()
def fact_keys(
    model, batch: FactBatch, layers: Sequence[MemoryLayer], chunk: int = 256
) -> dict[int, torch.Tensor]:
    """Keys (``W_out`` inputs at the subject's last token, averaged over templates): ``{layer: (N, d_k)}``
    in float64."""
    outs: dict[int, list] = {m.index: [] for m in layers}
    per = chunk * batch.n_templates
    for s in range(0, batch.input_ids.shape[0], per):
        sl = slice(s, s + per)
        last = max(layers, key=lambda m: m.index).block
        with capture(layers, batch.subject_pos[sl]) as st:
            _forward_until(model, batch.input_ids[sl], batch.attention_mask[sl], last)
        for m in layers:
            outs[m.index].append(st[("k", m.index)].double())
    return {i: _mean_over_templates(torch.cat(v), batch) for i, v in outs.items()}


@torch.no_grad()
def block_outputs(model, batch: FactBatch, layer: MemoryLayer, chunk: int = 256) -> torch.Tensor:
    """Residual-stream output of ``layer``'s block at the subject's last token, template-averaged, (N, d)."""
    per = chunk * batch.n_templates
    res = []
    for s in range(0, batch.input_ids.shape[0], per):
        sl = slice(s, s + per)
        with capture([layer], batch.subject_pos[sl], keys=False, resid=True) as st:
            _forward_until(model, batch.input_ids[sl], batch.attention_mask[sl], layer.block)
        res.append(st[("h", layer.index)].double())
    return _mean_over_templates(torch.cat(res), batch)


@torch.no_grad()
def block_values(model, batch: FactBatch, layer: MemoryLayer, chunk: int = 256) -> torch.Tensor:
    """``W_out``'s output v = W k at the subject's last token, template-averaged, (N, d) float64."""
    per = chunk * batch.n_templates
    res = []
    for s in range(0, batch.input_ids.shape[0], per):
        sl = slice(s, s + per)
        with capture_values(layer, batch.subject_pos[sl]) as st:
            _forward_until(model, batch.input_ids[sl], batch.attention_mask[sl], layer.block)
        res.append(st["v"].double())
    return _mean_over_templates(torch.cat(res), batch)
