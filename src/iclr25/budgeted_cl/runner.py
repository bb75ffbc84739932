"""An online (task-free) class-incremental CL runner under a FLOPs budget and a bytes budget.

One incoming sample at a time (the loop of the official ``methods/ours_new.py``)::

    if y_t is new: activate its head row and its SAR class state
    memory.insert(x_t)                             # class-balanced (aL-SAR) or reservoir (ER)
    acc += online_iter; while acc >= 1: train one step on a batch (SAR / random retrieval; ER adds stream samples)
    every eval_period samples: top-1 on the test images of all classes seen so far → A_auc list

A step's FLOPs are b·(F + B − Σ_{frozen} B_i) plus overheads (loss, the last-layer gradient for b_t, Fisher
accumulation, SAR's subsampled per-sample gradients), see :mod:`.budget`. Memory capacity is derived from the total
bytes budget: model bytes + per-exemplar bytes (image + method extras) + fixed method state.
ER (Chaudhry et al. 2019) follows the official baseline: reservoir memory, each batch = the pending stream samples
(b/2 of them) + random memory samples; memory is updated after training on them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from ..common.fields import bounded, check_fields
from .budget import BlockFlops, count_block_flops, exemplar_capacity, model_bytes, step_flops
from .freezing import AdaptiveLayerFreezer
from .model import BlocksSpec, BlockStructure, HeadSpec, TinyResNet, masked_logits, sar_target_layers
from .persample import PerSampleGradCapture
from .retrieval import ClassBalancedMemory, ClassSimilarity, FrequencySampler, ReservoirMemory
from .stream import ImageStreamData, images_to_float

__all__ = ["MethodConfig", "OnlineResult", "run_online", "frozen_step", "a_auc", "a_last", "METHODS"]


@dataclass(frozen=True)
class MethodConfig:
    """One online-CL method. Defaults = aL-SAR as in the official ``ex.sh`` / paper."""

    name: str = "aL-SAR"
    # "balanced" (aL-SAR, vanilla) | "reservoir" (ER)
    memory: str = bounded("balanced", choices=("balanced", "reservoir"))
    retrieval: str = bounded("sar", choices=("sar", "random"))
    freezing: bool = True
    # training iterations per incoming sample (fractional values accumulate)
    online_iter: float = bounded(1.0, lo=0, lo_open=True)
    # share of each batch taken from the stream (ER: 0.5)
    stream_fraction: float = bounded(0.0, lo=0, hi=1, hi_open=True)
    # SAR (paper Eq. 5–7)
    temperature: float = 0.125  # T (ex.sh; config default 2)
    k_coeff: float = 4.0  # decay r = b / (|M| k) (ex.sh; config default 2)
    sim_rate: float = 1e-3  # r_S
    corr_warmup: int = 50  # samples before SAR replaces balanced-random retrieval
    # paper: 0.05 % of the model's parameters; code: 1e-4 of each target layer
    grad_subsample: float = bounded(5e-4, lo=0, hi=1, lo_open=True)
    subsample_of: str = bounded("model", choices=("model", "layer"))  # "model" (paper) | "layer" (code)
    # aL (paper Eq. 1–4)
    unfreeze_rate: float = 0.5  # exploration probability (ex.sh; config default 0.25)
    # "random" (code) | "periodic" (2024 paper text: every `period`-th step)
    exploration: str = bounded("random", choices=("random", "periodic"))
    period: int = 2
    fisher_rate: float = 1e-3  # r_F
    grad_ema_rate: float = 1e-3
    # "per_sample" (paper: E[(∂ℓ/∂θ)²]) | "batch_mean" (code: squared mean gradient)
    fisher: str = bounded("per_sample", choices=("per_sample", "batch_mean"))
    stem_mode: str = bounded("code", choices=("code", "paper"))  # "code" | "paper" (see freezing.py)
    warmup_steps: int = 3

    def __post_init__(self) -> None:
        check_fields(self)  # the bounds declared above


METHODS: dict[str, MethodConfig] = {
    "er": MethodConfig("ER", memory="reservoir", retrieval="random", freezing=False, stream_fraction=0.5),
    "vanilla": MethodConfig("Vanilla", retrieval="random", freezing=False),
    "sar": MethodConfig("+SAR", retrieval="sar", freezing=False),
    "al": MethodConfig("+aL", retrieval="random", freezing=True),
    "al_sar": MethodConfig("aL-SAR", retrieval="sar", freezing=True),
}


@dataclass
class OnlineResult:
    """Anytime accuracies and budgets of one run."""

    eval_samples: list[int]
    eval_acc: list[float]  # %
    flops: float  # total training FLOPs (MAC convention)
    iterations: int
    capacity: int  # exemplars kept
    memory_bytes: int  # model + exemplars + method state actually stored at the end
    frozen_blocks: list[int] = field(default_factory=list)  # n_frozen of every step
    n_blocks: int = 0  # freezable blocks (the frozen-depth histogram has n_blocks + 1 bins)
    fisher_share: list[float] = field(default_factory=list)  # final φ_i / Σφ (aL only)
    backward_share: list[float] = field(default_factory=list)  # B_i / Σ B of the freezable blocks

    @property
    def a_auc(self) -> float:
        return a_auc(self.eval_acc)

    @property
    def a_last(self) -> float:
        return a_last(self.eval_acc)

    def summary(self) -> dict:
        fb = np.asarray(self.frozen_blocks, dtype=float)
        return {
            "a_auc": self.a_auc,
            "a_last": self.a_last,
            "gflops": self.flops / 1e9,
            "iterations": self.iterations,
            "capacity": self.capacity,
            "memory_bytes": self.memory_bytes,
            "frozen_step_fraction": float((fb > 0).mean()) if fb.size else 0.0,
            "mean_frozen_blocks": float(fb.mean()) if fb.size else 0.0,
            # fraction of steps that froze exactly n leading blocks, n = 0..n_blocks
            "frozen_depth_hist": (
                (np.bincount(fb.astype(int), minlength=self.n_blocks + 1) / fb.size).tolist()
                if fb.size
                else []
            ),
            "fisher_share": list(self.fisher_share),
            "backward_share": list(self.backward_share),
        }


def a_auc(accs: list[float]) -> float:
    """A_auc: mean of the anytime accuracies (official ``np.mean(test_acc)``)."""
    if len(accs) == 0:
        raise ValueError("accs must hold at least one evaluation")
    return float(np.mean(accs))


def a_last(accs: list[float]) -> float:
    """A_last: accuracy after the last sample."""
    if len(accs) == 0:
        raise ValueError("accs must hold at least one evaluation")
    return float(accs[-1])


def frozen_step(
    loss: torch.Tensor, groups: list[list[nn.Parameter]], n_frozen: int, opt: torch.optim.Optimizer
) -> tuple[torch.Tensor, ...]:
    """Backward only through blocks ``n_frozen:`` (+ head, always trained) and take an optimiser step.

    ``torch.autograd.grad`` on the trainable parameters prunes the graph below the first trainable block, so the
    frozen prefix really costs no backward; frozen parameters get no gradient and stay bit-identical.
    Returns the gradients of the trainable parameters (in ``groups[n_frozen:]`` order).
    """
    if not 0 <= n_frozen < len(groups):
        raise ValueError(
            f"n_frozen must be in [0, {len(groups) - 1}] (the head is never frozen), got {n_frozen}"
        )
    trainable = [p for grp in groups[n_frozen:] for p in grp]
    grads = torch.autograd.grad(loss, trainable)
    for p, gr in zip(trainable, grads, strict=True):
        p.grad = gr
    opt.step()
    opt.zero_grad(set_to_none=True)
    return grads


def _subsample_indices(layers: list[nn.Conv2d], n_params: int, m: MethodConfig, g: torch.Generator) -> list:
    sizes = [int(l.weight.numel()) for l in layers]
    if m.subsample_of == "model":  # paper: 0.05 % of the model, spread over target layers ∝ their size
        total = max(len(layers), round(m.grad_subsample * n_params))
        ks = [max(1, round(total * s / sum(sizes))) for s in sizes]
    else:  # code: int(numel · 1e-4) per layer (at least 1 here, the code would keep 0 for tiny layers)
        ks = [max(1, int(s * m.grad_subsample)) for s in sizes]
    return [torch.randperm(s, generator=g)[:k] for s, k in zip(sizes, ks, strict=True)]


class _OnlineLearner:
    """The state of one online run (model, optimiser, memory, method state, budget counters) and its stages.

    Built in the order that fixes the random streams: model init from ``seed``, then one generator (``seed + 1``)
    shared by the gradient sub-sampling, the freezer's exploration and the memory / retrieval draws.
    """

    def __init__(
        self,
        method: MethodConfig,
        data: ImageStreamData,
        *,
        seed,
        total_bytes,
        batch_size,
        lr,
        model_fn,
        device,
        blocks: BlocksSpec = None,
        head: HeadSpec = None,
    ):
        self.method, self.batch_size = method, batch_size
        self.dev = dev = torch.device(device)
        torch.manual_seed(seed)
        model = (model_fn or (lambda c: TinyResNet(n_classes=c)))(data.n_classes)
        if not isinstance(model, nn.Module):
            raise ValueError(f"model_fn must return a torch.nn.Module, got {type(model).__name__}")
        self.model = model = model.to(dev)
        self.view = view = BlockStructure(model, blocks, head)
        if method.freezing:
            view.require_freezable()
        self.g = torch.Generator().manual_seed(seed + 1)  # retrieval / memory / exploration randomness
        self.bf: BlockFlops = count_block_flops(model if view.native else view, data.sample_shape)
        self.C = data.n_classes
        self.groups = view.parameter_groups()
        self.opt = torch.optim.Adam(model.parameters(), lr=lr, foreach=True)
        self._method_state(data, total_bytes)
        self._bookkeeping(data)

    # --- stage 1: method state (SAR, aL) and the bytes it costs; memory sized from what is left ------------
    def _method_state(self, data: ImageStreamData, total_bytes: int) -> None:
        method, model, dev, C = self.method, self.model, self.dev, self.C
        n_params = sum(p.numel() for p in model.parameters())
        self.sar = sar = method.retrieval == "sar"
        self.targets = targets = sar_target_layers(model)
        if sar and not targets:
            raise ValueError(
                f"method {method.name!r} uses SAR retrieval, whose per-sample gradient targets are the conv2 layers "
                "of the package's BasicBlock residual blocks; this model has none. Use a method with "
                "retrieval='random' (ER, vanilla, +aL) for other models"
            )
        self.sub_idx = _subsample_indices(targets, n_params, method, self.g) if sar else []
        self.dim = sum(int(i.numel()) for i in self.sub_idx)
        per_ex, fixed = 0, 0
        self.sim = self.sampler = None
        if sar:
            self.sim = ClassSimilarity(C, self.dim, rate=method.sim_rate, device=dev)
            fixed += self.sim.state_bytes
        self.freezer = None
        if method.freezing:
            self.freezer = AdaptiveLayerFreezer(
                self.bf,
                fisher_rate=method.fisher_rate,
                grad_ema_rate=method.grad_ema_rate,
                unfreeze_rate=method.unfreeze_rate,
                exploration=method.exploration,
                period=method.period,
                warmup_steps=method.warmup_steps,
                stem_mode=method.stem_mode,
                generator=self.g,
            )
            fixed += self.freezer.state_bytes
        if sar:
            pe, fx = 4, 4 * C  # u_i per slot, U_c per class
            per_ex, fixed = per_ex + pe, fixed + fx
        self.per_ex, self.fixed = per_ex, fixed
        self.mbytes = model_bytes(model)
        self.cap = cap = exemplar_capacity(total_bytes, self.mbytes, data.bytes_per_image, per_ex, fixed)
        if cap < self.batch_size:
            raise ValueError(
                f"total_bytes={total_bytes} leaves {cap} exemplars, fewer than batch_size={self.batch_size}"
            )
        mem_cls = ReservoirMemory if method.memory == "reservoir" else ClassBalancedMemory
        self.memory = mem_cls(cap, data.sample_shape, dtype=data.train_x.dtype)
        if sar:
            self.sampler = FrequencySampler(
                cap,
                C,
                temperature=method.temperature,
                k_coeff=method.k_coeff,
                warmup_samples=method.corr_warmup,
                device=dev,
            )
        self.fisher_layers = [
            [m for m in blk.modules() if isinstance(m, (nn.Conv2d, nn.Linear))] for blk in self.view.blocks
        ]
        capture_layers = list(targets) if sar else []
        if self.freezer is not None and method.fisher == "per_sample":
            capture_layers = list(
                dict.fromkeys([*capture_layers, *[m for ls in self.fisher_layers for m in ls]])
            )
        self.capture = PerSampleGradCapture(capture_layers) if capture_layers else None
        positions = self._positions(data, [*self.targets, *[m for ls in self.fisher_layers for m in ls]])
        self.sar_entry_flops = (
            float(
                sum(
                    int(i.numel()) * positions[id(m)] for m, i in zip(self.targets, self.sub_idx, strict=True)
                )
            )
            if sar
            else 0.0
        )
        # per-sample Fisher (paper): every weight's per-sample gradient G_n U_nᵀ is computed outside the batched
        # backward, fan_out·fan_in·P multiply-adds per layer and sample (= the layer's forward MACs), then clamped,
        # squared and summed (2 FLOPs per entry and sample). Charged in full; the batch-mean estimator reuses the
        # step's gradients and costs only the squares.
        self.fisher_persample_macs = float(
            sum(
                m.weight[0].numel() * m.weight.shape[0] * positions[id(m)]
                for ls in self.fisher_layers
                for m in ls
            )
        )

    def _positions(self, data: ImageStreamData, layers) -> dict[int, int]:
        """Output positions P per sample of each layer (1 for Linear), from one forward of a blank sample."""
        model = self.model
        outs: dict[int, int] = {}
        with torch.no_grad():
            hs = [
                m.register_forward_hook(lambda mod, i, o: outs.__setitem__(id(mod), o[0, 0].numel()))
                for m in dict.fromkeys(layers)
            ]
            was_training = model.training
            model.eval()
            model(torch.zeros(1, *data.sample_shape, device=self.dev))
            model.train(was_training)
            for h in hs:
                h.remove()
        return outs

    # --- stage 2: counters and the data on the device -------------------------------------------------------
    def _bookkeeping(self, data: ImageStreamData) -> None:
        dev, groups = self.dev, self.groups
        self.seen = torch.zeros(self.C, dtype=torch.bool, device=dev)
        self.train_x, self.train_y = data.train_x.to(dev), data.train_y.to(dev)
        self.test_x, self.test_y = data.test_x.to(dev), data.test_y.to(dev)
        self.flops, self.iters, self.acc_iter = 0.0, 0, 0.0
        self.frozen_log: list[int] = []
        self.eval_samples: list[int] = []
        self.eval_acc: list[float] = []
        head = self.view.head_module
        self.D = getattr(self.model, "feature_dim", None) or (
            head.in_features if isinstance(head, nn.Linear) else 0
        )
        self.block_params = sum(p.numel() for grp in groups[:-1] for p in grp)
        self.offsets = np.cumsum(
            [0] + [len(grp) for grp in groups]
        ).tolist()  # parameter-list offsets per block
        self.pending: list[int] = []  # ER's stream samples not yet trained on
        self.stream_part = int(round(self.method.stream_fraction * self.batch_size))

    # --- stage 3: one training step (forward, freezing decision, partial backward, method-state updates) ---
    def train_step(self, xb: torch.Tensor, yb: torch.Tensor) -> None:
        capture, freezer, C = self.capture, self.freezer, self.C
        b = int(yb.numel())
        if capture is not None:
            capture.enabled = True
            capture.clear()
        z = masked_logits(self.model(xb), self.seen)  # full forward (the freezing decision needs the logits)
        loss = F.cross_entropy(z, yb)
        n_frozen, extra = 0, 2.0 * b * C  # loss: 2 FLOPs per logit
        if freezer is not None:
            b_t = freezer.informativeness(z, yb, self.view.head_module.weight)
            extra += b * C * self.D + 3.0 * b * C  # (softmax − onehot) W_fc
            n_frozen = freezer.decide(b_t)
        grads = frozen_step(loss, self.groups, n_frozen, self.opt)
        if freezer is not None and n_frozen == 0:
            extra += self._update_fisher(grads, b)
        if self.sar and all(capture.has_grad(m) for m in self.targets):
            v = torch.cat(
                [
                    capture.weight_grad_entries(m, i, scale=b)
                    for m, i in zip(self.targets, self.sub_idx, strict=True)
                ],
                1,
            )
            self.sim.update(v.clamp(-1, 1), yb)  # clamp(∂ℓ/∂θ_sub, −1, 1) per sample
            extra += self.sar_entry_flops * b + 6.0 * b * self.dim + C * C * self.dim  # entries, EMAs, S
        if capture is not None:
            capture.enabled = False
            capture.clear()
        self.flops += step_flops(self.bf, b, n_frozen) + extra
        self.iters += 1
        self.frozen_log.append(n_frozen)

    def _update_fisher(self, grads: tuple[torch.Tensor, ...], b: int) -> float:
        """Feeds the per-block Fisher trace to the freezer; returns its FLOPs."""
        if (
            self.method.fisher == "batch_mean"
        ):  # code: Σ_{θ∈block} clamp(∂L̄/∂θ, −1, 1)² of the batch-mean gradient
            sq = [gr.clamp(-1, 1).pow(2).sum() for gr in grads]
            o = self.offsets
            tr = torch.stack([sum(sq[a:e]) for a, e in zip(o[:-2], o[1:-1], strict=True)])
            extra = 2.0 * self.block_params
        else:  # paper: E_z[Σ_{θ∈block} clamp(∂ℓ(z)/∂θ, −1, 1)²] from per-sample conv/linear weight gradients
            tr = torch.stack(
                [
                    sum(self.capture.weight_grads(m, scale=b).clamp(-1, 1).pow(2).sum() for m in ls) / b
                    for ls in self.fisher_layers
                ]
            )
            extra = b * self.fisher_persample_macs + 2.0 * b * self.block_params
        self.freezer.update_fisher(tr.detach().cpu())
        return extra

    # --- stage 4: one incoming sample -------------------------------------------------------------------------
    def arrive(self, t: int, idx: int, last: bool) -> None:
        y_t = int(self.train_y[idx])
        if not bool(self.seen[y_t]):
            self.seen[y_t] = True
            if self.sim is not None:
                self.sim.add_class(y_t)
        if self.stream_part > 0:
            self._arrive_er(idx, last)
        else:
            self._arrive_memory(t, idx, y_t)

    def _arrive_er(self, idx: int, last: bool) -> None:
        """ER: accumulate stream samples, train on them + random memory, then update the (reservoir) memory."""
        pending, memory, dev = self.pending, self.memory, self.dev
        pending.append(idx)
        if len(pending) >= self.stream_part or last:
            self.acc_iter += self.method.online_iter * len(pending)
            while self.acc_iter >= 1:
                self.acc_iter -= 1
                n_mem = min(self.batch_size - len(pending), len(memory))
                mi = torch.randperm(len(memory), generator=self.g)[:n_mem]
                xb = torch.cat([self.train_x[pending], memory.x[mi].to(dev)])
                yb = torch.cat([self.train_y[pending], memory.y[mi].to(dev)])
                self.train_step(_to_float(xb), yb)
            for j in pending:
                memory.insert(self.train_x[j].cpu(), int(self.train_y[j]), self.g)
            self.pending = []

    def _arrive_memory(self, t: int, idx: int, y_t: int) -> None:
        """aL-SAR / vanilla: insert into the class-balanced memory, then train on batches retrieved from it."""
        memory, dev, g = self.memory, self.dev, self.g
        slot = memory.insert(self.train_x[idx].cpu(), y_t, g)
        if self.sampler is not None:
            self.sampler.on_insert(slot)
        self.acc_iter += self.method.online_iter
        while self.acc_iter >= 1:
            self.acc_iter -= 1
            m = len(memory)
            if self.sampler is not None:
                S = self.sim.matrix()
                bi = self.sampler.sample(self.batch_size, S, memory.labels.to(dev), t + 1, g).cpu()
                self.flops += m * self.C  # ĉ: one row of S·U per slot
            else:
                bi = torch.randperm(m, generator=g)[: self.batch_size]
            self.train_step(_to_float(memory.x[bi].to(dev)), memory.y[bi].to(dev))

    # --- stage 5: anytime evaluation and the result -------------------------------------------------------------
    def evaluate(self, n_seen_samples: int) -> None:
        """Top-1 accuracy (%) on the test images of the classes seen so far."""
        model, seen = self.model, self.seen
        model.eval()
        with torch.no_grad():
            keep = seen[self.test_y]
            z = masked_logits(model(_to_float(self.test_x[keep])), seen)
            acc = (z.argmax(1) == self.test_y[keep]).float().mean().item() * 100.0
        model.train()
        self.eval_samples.append(n_seen_samples)
        self.eval_acc.append(acc)

    def result(self) -> OnlineResult:
        if self.capture is not None:
            self.capture.remove()
        used = self.mbytes + self.memory.bytes + len(self.memory) * self.per_ex + self.fixed
        L = self.bf.n_blocks
        back = np.asarray(self.bf.backward[:L], dtype=float)
        phi = self.freezer.phi.numpy() if self.freezer is not None else np.zeros(0)
        return OnlineResult(
            self.eval_samples,
            self.eval_acc,
            self.flops,
            self.iters,
            self.cap,
            int(used),
            self.frozen_log,
            n_blocks=L,
            fisher_share=(phi / phi.sum()).tolist() if phi.size and phi.sum() > 0 else [],
            backward_share=(back / back.sum()).tolist() if self.freezer is not None else [],
        )


def _to_float(x: torch.Tensor) -> torch.Tensor:
    return images_to_float(x)  # uint8 / 255; float images (validated to lie in [0, 1]) unchanged


def run_online(
    method: MethodConfig,
    data: ImageStreamData,
    order: np.ndarray,
    *,
    seed: int,
    total_bytes: int,
    batch_size: int = 16,
    lr: float = 3e-4,
    eval_period: int = 50,
    model_fn: Callable[[int], nn.Module] | None = None,
    device: str = "cpu",
    blocks: BlocksSpec = None,
    head: HeadSpec = None,
) -> OnlineResult:
    """Run one method over the stream ``order`` (indices into ``data.train_*``) and return its anytime accuracy.

    ``total_bytes`` is the memory budget (model + exemplars + method state); ``model_fn(n_classes)`` builds the
    model (default :class:`TinyResNet`), initialised from ``seed``: any ``nn.Module`` mapping a batch of images
    to ``n_classes`` logits. Adaptive layer freezing (aL) needs its ordered blocks: ``blocks`` = submodule names
    or a callable ``model -> [modules]`` (forward order) and ``head`` = its linear classifier (default
    ``model.head``); models with ``.blocks``/``.head`` (like :class:`TinyResNet`) need neither. Methods without
    freezing (ER, vanilla) take any module as it is; SAR retrieval needs the package's ``BasicBlock`` layers.
    ``data`` images are uint8 (0–255) or float in [0, 1] (see :class:`ImageStreamData`).
    """
    if not isinstance(data, ImageStreamData):
        raise ValueError(f"data must be an ImageStreamData, got {type(data).__name__}")
    order = np.asarray(order)
    if order.ndim != 1 or order.size == 0 or not np.issubdtype(order.dtype, np.integer):
        raise ValueError(
            f"order must be a non-empty 1-D integer array of stream indices, got {order.dtype} {order.shape}"
        )
    if int(order.min()) < 0 or int(order.max()) >= data.train_x.shape[0]:
        raise ValueError(
            f"order indexes train samples 0..{data.train_x.shape[0] - 1}, got [{int(order.min())}, {int(order.max())}]"
        )
    if batch_size < 2:
        raise ValueError(f"batch_size must be >= 2, got {batch_size}")
    if eval_period < 1:
        raise ValueError(f"eval_period must be >= 1, got {eval_period}")
    if not lr > 0:
        raise ValueError(f"lr must be > 0, got {lr}")
    learner = _OnlineLearner(
        method,
        data,
        seed=seed,
        total_bytes=total_bytes,
        batch_size=batch_size,
        lr=lr,
        model_fn=model_fn,
        device=device,
        blocks=blocks,
        head=head,
    )
    n_stream = len(order)
    for t, idx in enumerate(order):
        last = t == n_stream - 1
        learner.arrive(t, int(idx), last)
        if (t + 1) % eval_period == 0 or last:
            learner.evaluate(t + 1)
    return learner.result()


def equal_flops_online_iter(
    target_flops: float, bf: BlockFlops, n_stream: int, batch_size: int, n_classes: int
) -> float:
    """online_iter giving a plain method (no freezing, no SAR) ``target_flops`` over ``n_stream`` samples."""
    per_iter = step_flops(bf, batch_size, 0) + 2.0 * batch_size * n_classes
    if per_iter <= 0 or n_stream <= 0:
        raise ValueError(f"n_stream must be > 0, got {n_stream}")
    return float(target_flops / (per_iter * n_stream))
