"""Score normalisation and the data scorer that extends PMP scores to the whole corpus (paper §2.3).

The PMP solver only scores a small proxy set. A cheap model is trained to predict the normalised scores,

    z_n = clip((s_n − mean(s)) / std(s), −3, 3),                                        (normalisation)
    ẑ(x) = wᵀ mean_{i ≤ last non-pad} h_i(x) + b,       min  mean_n (ẑ(x_n) − z_n)²      (data scorer, MSE)

where h_i are the last hidden states of a small LM backbone (``DataScorer``, the released design: backbone →
mean pooling over non-pad positions → ``Linear(hidden, 1)``; the checkpoint with the best validation
Spearman is kept). ``NgramRidgeScorer`` is the cheap option: ridge regression on unigram + (hashed) bigram
frequencies of the token ids (scikit-learn).
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
import torch.nn as nn

from iclr25.common.progress import progress
from iclr25.common.schedule import warmup_cosine_schedule
from iclr25.common.seeding import torch_generator

from .pmp import _check_int_pad, tokenizer_pad_id


def _scorer_pad_id(pad_id: int | None | str, tokenizer: Any, default: int | None, who: str) -> int | None:
    """pad id of a scorer: 'auto' → the tokenizer's pad id (when given), else ``default``; an explicit value
    that contradicts the tokenizer raises (it would treat padding as content or content as padding)."""
    if isinstance(pad_id, str) and pad_id != "auto":
        raise ValueError(f"pad_id must be a non-negative int, None or 'auto', got {pad_id!r}")
    if tokenizer is None:
        return default if pad_id == "auto" else (None if pad_id is None else _check_int_pad(pad_id))
    tok = tokenizer_pad_id(tokenizer)
    if pad_id != "auto" and pad_id != tok:
        raise ValueError(
            f"{who}: pad_id={pad_id!r} contradicts tokenizer.pad_token_id={tok}; pass pad_id='auto' (the tokenizer's) "
            "or drop the tokenizer"
        )
    return tok


def normalize_scores(scores: torch.Tensor | np.ndarray, clip: float = 3.0) -> torch.Tensor | np.ndarray:
    """z = clip((s − mean(s)) / std(s), −clip, clip) with the population std; same type as the input."""
    if not (isinstance(clip, (int, float)) and clip > 0):
        raise ValueError(f"clip must be a positive number, got {clip!r}")
    is_np = isinstance(scores, np.ndarray)
    s = torch.as_tensor(scores, dtype=torch.float64)
    if s.ndim != 1 or s.numel() < 2:
        raise ValueError(f"scores must be a 1-D array with at least 2 entries, got shape {tuple(s.shape)}")
    if not torch.isfinite(s).all():
        raise ValueError("scores must be finite, got NaN or inf")
    std = s.std(unbiased=False)
    z = (s - s.mean()) / (std if std > 0 else 1.0)
    z = z.clamp(-clip, clip)
    return z.numpy() if is_np else z


def spearman(pred: np.ndarray | torch.Tensor, target: np.ndarray | torch.Tensor) -> float:
    """Spearman rank correlation (``scipy.stats.spearmanr``)."""
    from scipy.stats import spearmanr

    r = spearmanr(np.asarray(pred, dtype=float), np.asarray(target, dtype=float)).statistic
    return float(r) if math.isfinite(r) else 0.0


def _as_numpy_tokens(tokens: np.ndarray | torch.Tensor) -> np.ndarray:
    a = tokens.detach().cpu().numpy() if isinstance(tokens, torch.Tensor) else np.asarray(tokens)
    if a.ndim != 2 or not np.issubdtype(a.dtype, np.integer):
        raise ValueError(f"tokens must be a 2-D integer array (N, L), got dtype {a.dtype} shape {a.shape}")
    return a.astype(np.int64, copy=False)


class NgramRidgeScorer:
    """Ridge regression (``sklearn.linear_model.Ridge``) on unigram + bigram frequencies of token ids.

    Features of a row: counts of each token id (``vocab_size`` columns) and of each bigram (a, b), hashed
    into ``n_buckets`` columns (exact when vocab_size² ≤ n_buckets), divided by the number of non-pad tokens.

    ``tokenizer``: take the pad id (``pad_id='auto'``) and, when ``vocab_size`` is None, ``len(tokenizer)`` from
    it. Without a tokenizer ``pad_id='auto'`` means 0 (the generated corpus of the reproduction pads with 0).
    """

    def __init__(
        self,
        vocab_size: int | None = None,
        n_buckets: int = 2**16,
        alpha: float = 1.0,
        pad_id: int | None | str = "auto",
        tokenizer: Any = None,
    ):
        if vocab_size is None and tokenizer is not None:
            vocab_size = len(tokenizer)
        pad_id = _scorer_pad_id(pad_id, tokenizer, 0, "NgramRidgeScorer")
        if pad_id is not None and isinstance(vocab_size, int) and pad_id >= vocab_size:
            raise ValueError(f"pad_id must be < vocab_size={vocab_size}, got {pad_id}")
        if not isinstance(vocab_size, int) or vocab_size < 2:
            raise ValueError(f"vocab_size must be an int >= 2, got {vocab_size!r}")
        if not isinstance(n_buckets, int) or n_buckets < 1:
            raise ValueError(f"n_buckets must be a positive int, got {n_buckets!r}")
        if not alpha >= 0:
            raise ValueError(f"alpha must be >= 0, got {alpha!r}")
        self.vocab_size, self.n_buckets, self.alpha, self.pad_id = vocab_size, n_buckets, float(alpha), pad_id
        self.model_ = None

    def features(self, tokens: np.ndarray | torch.Tensor):
        """Sparse (N, vocab_size + n_buckets) CSR matrix of unigram + bigram frequencies."""
        from scipy import sparse

        a = _as_numpy_tokens(tokens)
        n, L = a.shape
        V = self.vocab_size
        valid = np.ones_like(a, dtype=bool) if self.pad_id is None else a != self.pad_id
        length = np.maximum(valid.sum(1), 1).astype(np.float64)  # (N,)
        rows_u = np.broadcast_to(np.arange(n)[:, None], a.shape)[valid]
        cols_u = a[valid]
        bi = a[:, :-1] * V + a[:, 1:]  # (N, L-1) bigram ids
        if V * V > self.n_buckets:
            bi = (bi * 2654435761) % self.n_buckets  # multiplicative hashing
        bvalid = valid[:, :-1] & valid[:, 1:]
        rows_b = np.broadcast_to(np.arange(n)[:, None], bi.shape)[bvalid]
        cols_b = V + bi[bvalid]
        rows = np.concatenate([rows_u, rows_b])
        cols = np.concatenate([cols_u, cols_b])
        vals = 1.0 / length[rows]
        return sparse.csr_matrix((vals, (rows, cols)), shape=(n, V + self.n_buckets))

    def fit(self, tokens: np.ndarray | torch.Tensor, targets: np.ndarray | torch.Tensor) -> NgramRidgeScorer:
        from sklearn.linear_model import Ridge

        y = np.asarray(targets, dtype=np.float64)
        X = self.features(tokens)
        if y.shape != (X.shape[0],):
            raise ValueError(f"targets must have shape ({X.shape[0]},), got {y.shape}")
        self.model_ = Ridge(alpha=self.alpha).fit(X, y)
        return self

    def predict(self, tokens: np.ndarray | torch.Tensor) -> np.ndarray:
        if self.model_ is None:
            raise ValueError("NgramRidgeScorer is not fitted; call fit(tokens, targets) first")
        return self.model_.predict(self.features(tokens)).astype(np.float64)

    __call__ = predict


class DataScorer(nn.Module):
    """The released scorer design: ``AutoModel`` backbone → mean of last hidden states over non-pad positions
    → ``Linear(hidden, 1)`` with bias. ``forward`` returns ẑ (B,).

    ``pad_id='auto'``: ``tokenizer.pad_token_id`` when a tokenizer is given, else ``backbone.config.pad_token_id``;
    a ``ValueError`` when neither is set (e.g. a default Llama config without a tokenizer).
    """

    def __init__(self, backbone: nn.Module, pad_id: int | None | str = "auto", tokenizer: Any = None):
        cfg_pad = getattr(getattr(backbone, "config", None), "pad_token_id", None)
        if pad_id == "auto" and tokenizer is None and cfg_pad is None:
            raise ValueError(
                "pad_id='auto' cannot be resolved: backbone.config.pad_token_id is None and no tokenizer was given; "
                "pass tokenizer=..., pad_id=<int> or pad_id=None"
            )
        pad_id = _scorer_pad_id(pad_id, tokenizer, None if cfg_pad is None else int(cfg_pad), "DataScorer")
        super().__init__()
        hidden = backbone.config.hidden_size
        self.backbone = backbone
        self.head = nn.Linear(hidden, 1)
        self.pad_id = pad_id

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        if self.pad_id is None:
            mask = torch.ones_like(input_ids, dtype=torch.bool)
        else:
            mask = input_ids != self.pad_id
        h = self.backbone(input_ids=input_ids, attention_mask=mask.long()).last_hidden_state  # (B, L, H)
        m = mask.to(h.dtype).unsqueeze(-1)
        pooled = (h * m).sum(1) / m.sum(1).clamp_min(1.0)  # mean pooling over non-pad positions
        return self.head(pooled).squeeze(-1)

    @torch.no_grad()
    def predict(self, tokens: np.ndarray | torch.Tensor, batch_size: int = 256) -> np.ndarray:
        was = self.training
        self.eval()
        dev = next(self.parameters()).device
        x = torch.as_tensor(_as_numpy_tokens(tokens))
        out = [self(x[i : i + batch_size].to(dev)).float().cpu() for i in range(0, x.shape[0], batch_size)]
        self.train(was)
        return torch.cat(out).double().numpy()


def build_data_scorer(
    arch: str = "llama",
    seed: int = 0,
    pad_id: int | None | str = "auto",
    tokenizer: Any = None,
    **config_kwargs,
) -> DataScorer:
    """A :class:`DataScorer` on a freshly initialised HF ``AutoModel`` backbone (``iclr25.common.lm.tiny_config``).

    With ``tokenizer`` the backbone's vocabulary is ``len(tokenizer)`` and its ``pad_token_id`` and the pooling
    mask are ``tokenizer.pad_token_id``; without one, ``pad_id='auto'`` is the tiny config's pad id 0.
    """
    from transformers import AutoModel

    from iclr25.common.lm import tiny_config

    if tokenizer is not None:
        pad_id = _scorer_pad_id(pad_id, tokenizer, None, "build_data_scorer")
        config_kwargs.setdefault("vocab_size", len(tokenizer))
    config_kwargs.setdefault("attn_implementation", "sdpa")
    cfg = tiny_config(arch, **config_kwargs)
    if isinstance(pad_id, int):
        cfg.pad_token_id = pad_id  # the embedding's padding_idx follows the data's pad id
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(int(seed))
        backbone = AutoModel.from_config(cfg, attn_implementation=cfg._attn_implementation)
        return DataScorer(backbone, pad_id=pad_id)


@dataclass
class ScorerFit:
    best_spearman: float
    best_epoch: int
    history: list[dict] = field(default_factory=list)


def train_data_scorer(
    scorer: DataScorer,
    tokens: torch.Tensor | np.ndarray,
    targets: torch.Tensor | np.ndarray,
    dev_num: int,
    epochs: int = 5,
    batch_size: int = 512,
    lr: float = 1e-4,
    weight_decay: float = 0.01,
    warmup_steps: int = 10,
    grad_clip: float = 1.0,
    seed: int = 0,
    device: str | torch.device = "cpu",
) -> ScorerFit:
    """Train ``scorer`` with MSE on (tokens, z); the first ``dev_num`` rows are the validation split.

    AdamW, linear warm-up then cosine to 0 (transformers' schedule via :mod:`iclr25.common.schedule`; step s < warmup
    runs at lr·(s+1)/warmup), clipping, and the checkpoint with the best validation Spearman is loaded back at the end (the released trainer's defaults: lr 1e-4, wd 0.01, 10 warm-up, clip 1, 5 epochs).
    """
    x = torch.as_tensor(_as_numpy_tokens(tokens))
    y = torch.as_tensor(np.asarray(targets, dtype=np.float32))
    if y.shape != (x.shape[0],):
        raise ValueError(f"targets must have shape ({x.shape[0]},), got {tuple(y.shape)}")
    if not isinstance(dev_num, int) or not 1 <= dev_num < x.shape[0]:
        raise ValueError(f"dev_num must be an int in [1, {x.shape[0] - 1}], got {dev_num!r}")
    for name, v in (("epochs", epochs), ("batch_size", batch_size)):
        if not isinstance(v, int) or v < 1:
            raise ValueError(f"{name} must be a positive int, got {v!r}")
    x_dev, y_dev, x_tr, y_tr = x[:dev_num], y[:dev_num], x[dev_num:], y[dev_num:]
    scorer.to(device).train()
    opt = torch.optim.AdamW(scorer.parameters(), lr=lr, weight_decay=weight_decay)
    per_epoch = math.ceil(x_tr.shape[0] / batch_size)
    total = epochs * per_epoch

    sched = warmup_cosine_schedule(opt, warmup_steps, total, min_lr_ratio=0.0)

    g = torch_generator(seed)
    best = (-math.inf, -1, None)
    history: list[dict] = []
    for epoch in progress(range(epochs), desc="scorer"):
        perm = torch.randperm(x_tr.shape[0], generator=g)
        for i in range(per_epoch):
            idx = perm[i * batch_size : (i + 1) * batch_size]
            pred = scorer(x_tr[idx].to(device))
            loss = torch.nn.functional.mse_loss(pred.float(), y_tr[idx].to(device))
            opt.zero_grad(set_to_none=True)
            loss.backward()
            if grad_clip > 0:
                torch.nn.utils.clip_grad_norm_(scorer.parameters(), grad_clip)
            opt.step()
            sched.step()
        rho = spearman(scorer.predict(x_dev), y_dev.numpy())
        history.append({"epoch": epoch + 1, "train_mse": float(loss.detach()), "val_spearman": rho})
        if rho > best[0]:
            best = (rho, epoch + 1, copy.deepcopy(scorer.state_dict()))
    scorer.load_state_dict(best[2])
    scorer.eval()
    return ScorerFit(best_spearman=best[0], best_epoch=best[1], history=history)
