"""A block-structured tiny ResNet (stem + basic blocks + linear head) for the budgeted-CL experiments.

The official code freezes whole "blocks" (``MODEL_BLOCK_DICT``: stem, residual blocks, head = pool + fc). Here a
block-structured model is anything exposing ``blocks: nn.ModuleList`` (freezable, in forward order),
``head: nn.Linear`` (never frozen) and ``features(x)`` (the penultimate features x_L fed to the head).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
from torch import nn
from torch.nn import functional as F


class BasicBlock(nn.Module):
    """ResNet basic block: conv1-BN-ReLU, conv2-BN, + shortcut, ReLU. ``conv2`` is SAR's gradient target layer."""

    def __init__(self, c_in: int, c_out: int, stride: int = 1):
        super().__init__()
        self.conv1 = nn.Conv2d(c_in, c_out, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(c_out)
        self.relu1 = nn.ReLU()
        self.conv2 = nn.Conv2d(c_out, c_out, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(c_out)
        self.relu2 = nn.ReLU()
        self.shortcut: nn.Module = nn.Identity()
        if stride != 1 or c_in != c_out:
            self.shortcut = nn.Sequential(
                nn.Conv2d(c_in, c_out, 1, stride, bias=False), nn.BatchNorm2d(c_out)
            )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.relu1(self.bn1(self.conv1(x)))
        h = self.bn2(self.conv2(h))
        return self.relu2(h + self.shortcut(x))


class TinyResNet(nn.Module):
    """Stem conv (16 ch) + basic blocks (default 16-32-32-64, strides 1-2-1-2) + global pool + linear head.

    ≈ 0.1 M parameters for 1-channel 16×16 inputs and 10 classes (README, "Reproduction"). ``blocks[0]`` is the stem.
    The head has a fixed number of outputs (all classes of the benchmark); unseen classes are masked by the
    caller, which is equivalent to the official growing head (new rows start at their init, Adam moments 0).
    """

    def __init__(
        self,
        n_classes: int = 10,
        in_channels: int = 1,
        stem_channels: int = 16,
        widths: Sequence[int] = (16, 32, 32, 64),
        strides: Sequence[int] = (1, 2, 1, 2),
    ):
        super().__init__()
        if len(widths) != len(strides) or not widths:
            raise ValueError(
                f"widths and strides must be non-empty and of equal length, got {widths}, {strides}"
            )
        if n_classes < 2:
            raise ValueError(f"n_classes must be >= 2, got {n_classes}")
        stem = nn.Sequential(
            nn.Conv2d(in_channels, stem_channels, 3, 1, 1, bias=False),
            nn.BatchNorm2d(stem_channels),
            nn.ReLU(),
        )
        blocks: list[nn.Module] = [stem]
        c = stem_channels
        for w, s in zip(widths, strides, strict=True):
            blocks.append(BasicBlock(c, w, s))
            c = w
        self.blocks = nn.ModuleList(blocks)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.head = nn.Linear(c, n_classes)
        self.feature_dim = c

    def features(self, x: torch.Tensor) -> torch.Tensor:
        """x_L: the pooled penultimate features, shape (batch, feature_dim)."""
        for b in self.blocks:
            x = b(x)
        return self.pool(x).flatten(1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(x))


def block_parameters(model: nn.Module) -> list[list[nn.Parameter]]:
    """Parameters of each freezable block (``model.blocks``) followed by the head's as the last entry."""
    groups = [list(b.parameters()) for b in model.blocks]
    groups.append(list(model.head.parameters()))
    return groups


def sar_target_layers(model: nn.Module) -> list[nn.Conv2d]:
    """SAR's gradient target layers: the ``conv2`` convolution of every residual block (official choice)."""
    return [m.conv2 for m in model.modules() if isinstance(m, BasicBlock)]


def masked_logits(logits: torch.Tensor, seen: torch.Tensor) -> torch.Tensor:
    """Logits of unseen classes set to -inf-like so softmax gives them exactly 0 (growing-head equivalent)."""
    return logits.masked_fill(~seen, torch.finfo(logits.dtype).min)


def cross_entropy_seen(logits: torch.Tensor, y: torch.Tensor, seen: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy(masked_logits(logits, seen), y)


BlocksSpec = Callable[[nn.Module], Sequence[nn.Module]] | Sequence[str] | None
HeadSpec = Callable[[nn.Module], nn.Module] | str | None


class BlockStructure:
    """The block view of *any* ``nn.Module`` used by the runner: ordered freezable blocks + a head (never frozen).

    * A model exposing ``blocks`` and ``head`` (e.g. :class:`TinyResNet`) is used as it is.
    * Otherwise ``blocks`` names the freezable blocks in forward order — a callable ``model -> [modules]`` or a
      list of submodule names (``model.get_submodule``) — and ``head`` the classifier (callable or name; default
      ``model.head`` if present). Parameters outside every block and the head are trained always (head group).
    * With neither, the whole model is one unfreezable group: enough for methods without freezing (ER, vanilla).

    Attributes used by :func:`~.budget.count_block_flops`: ``blocks``, ``head`` and calling the view runs the model.
    """

    def __init__(self, model: nn.Module, blocks: BlocksSpec = None, head: HeadSpec = None):
        if not isinstance(model, nn.Module):
            raise ValueError(f"model must be a torch.nn.Module, got {type(model).__name__}")
        self.model = model
        native = blocks is None and head is None and hasattr(model, "blocks") and hasattr(model, "head")
        self.native = native
        if native:
            self.blocks = list(model.blocks)
            self.head_module: nn.Module | None = model.head
        else:
            self.blocks = self._resolve_blocks(model, blocks)
            self.head_module = self._resolve_head(model, head)
        self.freezable = native or blocks is not None
        # for FLOPs counting: the head group holds the head and every leaf module outside the blocks
        inside = {id(m) for b in self.blocks for m in b.modules()}
        if self.head_module is not None:
            inside |= {id(m) for m in self.head_module.modules()}
        rest = [m for m in model.modules() if len(list(m.children())) == 0 and id(m) not in inside]
        if native:
            self.head = model.head
            self.pool = getattr(model, "pool", None)
            if self.pool is None:
                del self.pool
        else:
            self.head = nn.ModuleList(([self.head_module] if self.head_module is not None else []) + rest)
            if not self.blocks:  # the whole model is one (unfreezable) block
                self.blocks = [nn.ModuleList(rest)]
                self.head = nn.ModuleList([self.head_module] if self.head_module is not None else [])

    @staticmethod
    def _resolve_blocks(model: nn.Module, blocks: BlocksSpec) -> list[nn.Module]:
        if blocks is None:
            return []
        if callable(blocks):
            out = list(blocks(model))
        elif isinstance(blocks, (str, bytes)):
            raise ValueError(
                f"blocks must be a list of submodule names or a callable, got the string {blocks!r}"
            )
        else:
            try:
                out = [model.get_submodule(str(n)) for n in blocks]
            except AttributeError as e:
                raise ValueError(f"blocks names a submodule the model does not have: {e}") from None
        if not out or not all(isinstance(b, nn.Module) for b in out):
            raise ValueError(f"blocks must give a non-empty ordered list of nn.Module, got {out!r}")
        if len({id(b) for b in out}) != len(out):
            raise ValueError("blocks lists the same module twice")
        return out

    @staticmethod
    def _resolve_head(model: nn.Module, head: HeadSpec) -> nn.Module | None:
        if head is None:
            return (
                getattr(model, "head", None) if isinstance(getattr(model, "head", None), nn.Module) else None
            )
        if callable(head) and not isinstance(head, nn.Module):
            out = head(model)
        elif isinstance(head, nn.Module):
            out = head
        else:
            try:
                out = model.get_submodule(str(head))
            except AttributeError as e:
                raise ValueError(f"head names a submodule the model does not have: {e}") from None
        if not isinstance(out, nn.Module):
            raise ValueError(f"head must resolve to an nn.Module, got {type(out).__name__}")
        return out

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        return self.model(x)

    def parameters(self):
        return self.model.parameters()

    @property
    def training(self) -> bool:
        return self.model.training

    def eval(self):
        self.model.eval()
        return self

    def train(self, mode: bool = True):
        self.model.train(mode)
        return self

    def parameter_groups(self) -> list[list[nn.Parameter]]:
        """Parameters per freezable block, then the head group last (head + everything outside the blocks)."""
        if self.native:
            return block_parameters(self.model)
        seen: set[int] = set()
        groups = []
        for b in self.blocks:
            grp = [p for p in b.parameters() if id(p) not in seen]
            seen |= {id(p) for p in grp}
            groups.append(grp)
        groups.append([p for p in self.model.parameters() if id(p) not in seen])
        return groups

    def require_freezable(self) -> None:
        if not self.freezable:
            raise ValueError(
                "adaptive layer freezing needs the model's ordered blocks: pass blocks=[submodule names] or "
                "blocks=callable(model) -> [modules] (and head= the classifier if the model has no .head)"
            )
        if not isinstance(self.head_module, nn.Linear):
            raise ValueError(
                "adaptive layer freezing needs a linear classifier head (pass head= its name or a callable); got "
                f"{type(self.head_module).__name__ if self.head_module is not None else None}"
            )
