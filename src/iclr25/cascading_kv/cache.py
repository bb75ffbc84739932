"""Cascading KV cache as a ``transformers`` v5 ``Cache`` (one :class:`CascadingLayer` per decoder layer).

A layer stores **pre-RoPE** keys, values, EMA scores and original indices of its sinks and cascade slots
(bookkeeping in :class:`~iclr25.cascading_kv.cascade.CascadeState`). Reading it (``read``) rotates the keys with
their *cache positions* (sinks ``0..S−1``, cached tokens ``S..S+n−1`` in age order), so positions never exceed
``S + N + stride`` and no retraining is needed. The attention path
(:func:`iclr25.cascading_kv.attention.cascade_attention_forward`) computes attention over
``[sinks | cache | chunk]``, the EMA scores, and then calls ``commit`` to push the chunk through the cascades
(the official order: attention → score update → insertion).

``update`` only records the chunk as *pending* and hands the layer to the attention function of the same forward
call; it returns the chunk's own keys/values unchanged.
"""

from __future__ import annotations

import threading

import torch
from transformers.cache_utils import Cache, CacheLayerMixin

from .cascade import EMPTY, CascadeState
from .scores import HEAD_REDUCTIONS

_PENDING = threading.local()  # the layer whose chunk waits for its attention call (same thread, same forward)


def take_pending(layer_idx: int | None = None) -> CascadingLayer | None:
    """Pop the layer handed over by the last ``CascadingLayer.update`` (``None`` when there is none)."""
    layer = getattr(_PENDING, "layer", None)
    _PENDING.layer = None
    if (
        layer is not None
        and layer_idx is not None
        and layer.layer_idx is not None
        and layer.layer_idx != layer_idx
    ):
        raise RuntimeError(
            f"cascade attention of layer {layer_idx} received the cache of layer {layer.layer_idx}"
        )
    return layer


def find_rotary_embedding(model: torch.nn.Module) -> torch.nn.Module:
    """The model's rotary-embedding module (``forward(x, position_ids) -> (cos, sin)``, has ``inv_freq``)."""
    for m in model.modules():
        if (
            hasattr(m, "inv_freq")
            and hasattr(m, "attention_scaling")
            and type(m).__name__.endswith("RotaryEmbedding")
        ):
            return m
    raise ValueError(
        f"model must contain a *RotaryEmbedding module (RoPE decoder), none found in {type(model).__name__}"
    )


class CascadingLayer(CacheLayerMixin):
    """One decoder layer's cascading cache: sinks + ``C`` cascades of ``W = N / C`` slots, per (batch, KV head)."""

    is_sliding = False
    is_compileable = False
    is_croppable = False

    def __init__(
        self,
        sink_tokens: int = 64,
        cache_size: int = 2048,
        cascades: int = 4,
        beta: float = 0.9999,
        head_reduction: str = "max",
        homogeneous_heads: bool = False,
        eager_fill: bool = True,
        rotary_emb: torch.nn.Module | None = None,
        layer_idx: int | None = None,
    ) -> None:
        super().__init__()
        _validate(sink_tokens, cache_size, cascades, beta, head_reduction)
        self.sink_tokens, self.cache_size, self.cascades = int(sink_tokens), int(cache_size), int(cascades)
        self.beta = float(beta)
        self.head_reduction = head_reduction
        self.homogeneous_heads = bool(homogeneous_heads)
        self.eager_fill = bool(eager_fill)
        self.rotary_emb = rotary_emb
        self.layer_idx = layer_idx
        self.state: CascadeState | None = None
        self._pending: tuple[torch.Tensor, torch.Tensor] | None = None

    # ---------------------------------------------------------------- CacheLayerMixin API
    def lazy_initialization(self, key_states: torch.Tensor, value_states: torch.Tensor) -> None:
        B, H, _, D = key_states.shape
        Dv = value_states.shape[-1]
        self.device, self.dtype = key_states.device, key_states.dtype
        kw = dict(device=key_states.device, dtype=key_states.dtype)
        self.keys = torch.zeros(B, H, self.cache_size, D, **kw)  # pre-RoPE keys of the cascade slots
        self.values = torch.zeros(B, H, self.cache_size, Dv, **kw)
        self.sink_keys = torch.zeros(B, H, self.sink_tokens, D, **kw)  # pre-RoPE
        self.sink_values = torch.zeros(B, H, self.sink_tokens, Dv, **kw)
        self.state = CascadeState(self.sink_tokens, self.cache_size, self.cascades, (B, H), self.eager_fill)
        self.is_initialized = True

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, *args, **kwargs):
        """Record the chunk (keys already rotated by the model) for the cascade attention call that follows."""
        if getattr(_PENDING, "layer", None) is not None:
            _PENDING.layer = None
            raise RuntimeError(
                "CascadingKVCache was updated but the previous chunk never reached the cascade attention function: "
                "call iclr25.cascading_kv.enable_cascade_attention(model) first (attn_implementation='cascade')."
            )
        if not self.is_initialized:
            self.lazy_initialization(key_states, value_states)
        self._pending = (key_states, value_states)
        _PENDING.layer = self
        return key_states, value_states

    def get_seq_length(self) -> int:
        return 0 if self.state is None else self.state.seq_length

    def get_max_length(self) -> int:
        return self.sink_tokens + self.cache_size

    def get_mask_sizes(self, query_length: int) -> tuple[int, int]:
        return self.get_seq_length() + query_length, 0

    def reset(self) -> None:
        if self.is_initialized:
            self.keys.zero_()
            self.values.zero_()
            self.sink_keys.zero_()
            self.sink_values.zero_()
            self.state.reset()
        self._pending = None

    def crop(self, tokens_to_remove: int) -> None:
        raise NotImplementedError(
            "a cascading cache evicts tokens irreversibly: it cannot be cropped/rolled back"
        )

    def _select_batch(self, index: torch.Tensor) -> None:
        if not self.is_initialized:
            return
        index = index.to(self.keys.device)
        for name in ("keys", "values", "sink_keys", "sink_values"):
            setattr(self, name, getattr(self, name).index_select(0, index))
        H = self.keys.shape[1]
        rows = (index.cpu()[:, None] * H + torch.arange(H)[None, :]).reshape(-1)
        self.state.select_rows(rows, (index.numel(), H))

    def reorder_cache(self, beam_idx: torch.LongTensor) -> None:
        self._select_batch(beam_idx)

    def batch_select_indices(self, indices: torch.Tensor) -> None:
        self._select_batch(torch.as_tensor(indices).reshape(-1))

    def batch_repeat_interleave(self, repeats: int) -> None:
        if self.is_initialized:
            self._select_batch(torch.arange(self.keys.shape[0]).repeat_interleave(repeats))

    # ---------------------------------------------------------------- cascade API
    @property
    def n_sinks(self) -> int:
        return 0 if self.state is None else self.state.n_sinks

    def pop_pending(self) -> tuple[torch.Tensor, torch.Tensor]:
        if self._pending is None:
            raise RuntimeError("no pending chunk: CascadingLayer.update must run before the attention call")
        p, self._pending = self._pending, None
        return p

    def read(self) -> dict[str, torch.Tensor]:
        """Stored tensors (pre-RoPE keys) with their cache positions and validity, sinks first.

        Returns ``keys`` ``(B, H, n_sinks + N, D)``, ``values``, ``positions`` ``(n_sinks + N,)`` (0 where empty),
        ``valid`` ``(n_sinks + N,)`` bool.
        """
        st = self.state
        ns = st.n_sinks
        keys = torch.cat([self.sink_keys[:, :, :ns], self.keys], dim=2)
        values = torch.cat([self.sink_values[:, :, :ns], self.values], dim=2)
        pos = torch.cat([st.sink_positions(), st.slot_positions()])
        valid = torch.cat([torch.ones(ns, dtype=torch.bool), st.valid_mask()])
        dev = self.keys.device
        return {"keys": keys, "values": values, "positions": pos.clamp(min=0).to(dev), "valid": valid.to(dev)}

    def commit(
        self,
        keys_pre_rope: torch.Tensor,
        values: torch.Tensor,
        cache_score_add: torch.Tensor,
        new_scores: torch.Tensor,
    ) -> None:
        """EMA-update the cached scores, then insert the chunk token by token (Algorithm 2).

        ``keys_pre_rope``/``values`` ``(B, H, q, D)``; ``cache_score_add`` ``(B, H, N)`` = Σ_j (1−β) β^{q−1−j} A[j,k]
        for the cache slots; ``new_scores`` ``(B, H, q)`` the chunk tokens' initial scores.
        """
        st = self.state
        q = keys_pre_rope.shape[2]
        st.decay_scores(self.beta**q, cache_score_add)
        ns0 = st.n_sinks
        res = st.push(new_scores)
        n = res.n_to_sinks
        if n:
            self.sink_keys[:, :, ns0 : ns0 + n] = keys_pre_rope[:, :, :n]
            self.sink_values[:, :, ns0 : ns0 + n] = values[:, :, :n]
        src = res.src.to(self.keys.device)  # (B, H, N) index into cat(old slots, chunk)
        idx = src.clamp(min=0).unsqueeze(-1)
        self.keys = torch.cat([self.keys, keys_pre_rope], 2).gather(
            2, idx.expand(-1, -1, -1, self.keys.shape[-1])
        )
        self.values = torch.cat([self.values, values], 2).gather(
            2, idx.expand(-1, -1, -1, self.values.shape[-1])
        )
        empty = (src == EMPTY).unsqueeze(-1)
        self.keys = self.keys.masked_fill(empty, 0)
        self.values = self.values.masked_fill(empty, 0)


def _validate(sink_tokens, cache_size, cascades, beta, head_reduction) -> None:
    for name, v, lo in (
        ("sink_tokens", sink_tokens, 0),
        ("cache_size", cache_size, 1),
        ("cascades", cascades, 1),
    ):
        if isinstance(v, bool) or not isinstance(v, int) or v < lo:
            raise ValueError(f"{name} must be an int >= {lo}, got {v!r}")
    if cache_size % cascades:
        raise ValueError(
            f"cache_size must be divisible by cascades, got cache_size={cache_size}, cascades={cascades}"
        )
    if not (isinstance(beta, (int, float)) and 0.0 < float(beta) < 1.0):
        raise ValueError(f"beta must be a float in (0, 1), got {beta!r}")
    if head_reduction not in HEAD_REDUCTIONS:
        raise ValueError(f"head_reduction must be one of {HEAD_REDUCTIONS}, got {head_reduction!r}")


class CascadingKVCache(Cache):
    """Cascading KV cache for any RoPE decoder of ``transformers`` (Llama, Qwen2, Mistral; GQA included).

    Parameters
    ----------
    model: the model (gives the number of layers and its rotary embedding); or pass ``num_layers`` and ``rotary_emb``.
    sink_tokens: ``S`` attention sinks (paper's scripts: 64).
    cache_size: ``N`` slots per layer besides the sinks, split into ``cascades`` sub-caches of ``W = N / C``.
    cascades: ``C``; ``1`` is exactly StreamingLLM (sinks + sliding window).
    beta: EMA decay of the attention scores (0.9999 in the submission; the final code release uses 0.9999999).
    head_reduction: ``max`` (paper's scripts) or ``mean`` over the query heads of a group.
    homogeneous_heads: reduce over all query heads so every KV head keeps the same tokens.
    eager_fill: every cascade accepts every token until the cache is first full.

    Use with ``enable_cascade_attention(model)`` (done by :func:`strided_prefill` / :func:`generate_streaming`).
    ``get_seq_length()`` is the number of tokens held (sinks + cascades), which is also where the next chunk's
    cache positions start.
    """

    def __init__(
        self,
        model: torch.nn.Module | None = None,
        *,
        cache_size: int,
        sink_tokens: int = 64,
        cascades: int = 4,
        beta: float = 0.9999,
        head_reduction: str = "max",
        homogeneous_heads: bool = False,
        eager_fill: bool = True,
        num_layers: int | None = None,
        rotary_emb: torch.nn.Module | None = None,
    ) -> None:
        _validate(sink_tokens, cache_size, cascades, beta, head_reduction)
        if model is not None:
            rotary_emb = rotary_emb if rotary_emb is not None else find_rotary_embedding(model)
            num_layers = (
                num_layers if num_layers is not None else model.config.get_text_config().num_hidden_layers
            )
        if num_layers is None or rotary_emb is None:
            raise ValueError("pass model=..., or both num_layers=... and rotary_emb=... (got None)")
        if not isinstance(num_layers, int) or num_layers < 1:
            raise ValueError(f"num_layers must be an int >= 1, got {num_layers!r}")
        self.config_kwargs = dict(
            sink_tokens=sink_tokens, cache_size=cache_size, cascades=cascades, beta=beta,
            head_reduction=head_reduction, homogeneous_heads=homogeneous_heads, eager_fill=eager_fill,
        )  # fmt: skip
        layers = [
            CascadingLayer(**self.config_kwargs, rotary_emb=rotary_emb, layer_idx=i)
            for i in range(num_layers)
        ]
        super().__init__(layers=layers)
        self.rotary_emb = rotary_emb

    @property
    def sink_tokens(self) -> int:
        return self.config_kwargs["sink_tokens"]

    @property
    def cache_size(self) -> int:
        return self.config_kwargs["cache_size"]

    @property
    def cascades(self) -> int:
        return self.config_kwargs["cascades"]

    def retained(self, layer_idx: int = 0) -> torch.Tensor:
        """``(B, H_kv, S + N)`` original token indices held by a layer (sinks first, ``-1`` = empty)."""
        st = self.layers[layer_idx].state
        if st is None:
            raise ValueError(f"layer {layer_idx} is empty: run the model on some tokens first")
        return st.retained()

    def cache_tensor_bytes(self) -> int:
        """Bytes held by the cache's tensors (constant in the prompt length)."""
        total = 0
        for layer in self.layers:
            if layer.is_initialized:
                for t in (layer.keys, layer.values, layer.sink_keys, layer.sink_values):
                    total += t.numel() * t.element_size()
        return total
