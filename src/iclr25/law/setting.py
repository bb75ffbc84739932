"""What the seeds of a LaW run share (:class:`Setting`): the small world (:func:`make_world`), the knowledgeable tiny
Llama trained on its facts, recall rows and generic text (:func:`build_model`, :func:`train_model`, cached by
:func:`_model_hash`), its key covariances, the held-out tuning subjects and evaluation sets; the washing methods
applied to it (LaW, MEMIT→EOS, FT-UL, FT→EOS, LaW's ablations) and the tuning of λ and the FT learning rates
(:meth:`Setting.tune`). ``cfg`` is the reproduction's ``Config`` (``config.py``) or any object with its fields."""

from __future__ import annotations

import copy
import hashlib
import json
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import numpy as np
import torch

from iclr25.common.io import atomic_write_with
from iclr25.common.lm import tiny_causal_lm
from iclr25.common.progress import log
from iclr25.common.schedule import warmup_cosine_schedule
from iclr25.common.seeding import derive_seed, torch_generator
from iclr25.common.train import causal_lm_loss_sum

from .baselines import ft_to_eos, ft_unlearn
from .covariance import key_covariance
from .evaluation import fact_accuracy, generic_loss
from .memit import memit_to_eos
from .washing import c_ratio, wash
from .world import World


def make_world(cfg) -> World:
    return World(replace(cfg.world, seed=cfg.seed))  # the world is drawn from the run's seed


def _model_hash(cfg) -> str:
    # the same names and values as before the world was nested (one cached model name per trained model)
    world = ("subjects", "relation_first", "first_names", "relations", "objects", "recall_pairs", "recall_keys",
             "generic_states", "generic_len")  # fmt: skip
    keys = ("arch", "hidden", "layers", "heads", "train_steps", "train_lr", "fact_rows", "recall_rows", "generic_rows",
            "recall_train_len", "eval_every", "train_stop_at", "seed")  # fmt: skip
    d = {k: getattr(cfg.world, k) for k in world} | {k: getattr(cfg, k) for k in keys}
    return hashlib.sha256(json.dumps(d, sort_keys=True).encode()).hexdigest()[:16]


def build_model(cfg, world: World, device: str):
    return tiny_causal_lm(
        cfg.arch, seed=derive_seed(cfg.seed, "init"), vocab_size=world.vocab_size, hidden=cfg.hidden,
        layers=cfg.layers, heads=cfg.heads, intermediate=4 * cfg.hidden, max_positions=64,
    ).to(device)  # fmt: skip


def _pad(t: torch.Tensor, L: int, value: int) -> torch.Tensor:
    return torch.nn.functional.pad(t, (0, L - t.shape[1]), value=value)


def train_model(cfg, world: World, cache: Path, device: str = "cpu"):
    """Train (or load from ``cache``) the knowledgeable model on batches of facts, recall rows and generic text.

    AdamW with warm-up + cosine decay (``common.schedule``) over at most ``train_steps``; every ``eval_every`` steps
    the fact accuracy and the recall accuracy on a separate probe set (not the evaluation probes) are measured and
    training stops once both reach ``train_stop_at`` (early stopping; ``common.train.train_lm`` has none). Fact rows
    (5 tokens) go through their own forward pass instead of being padded to the recall rows' length. Returns
    ``(model, info)`` with the CPU seconds, the steps taken and the accuracy trace."""
    from safetensors.torch import load_file, save_file

    model = build_model(cfg, world, device)
    path = cache / f"model_{_model_hash(cfg)}.safetensors"
    info_path = path.with_suffix(".json")
    if path.exists() and info_path.exists():
        model.load_state_dict(load_file(str(path), device=str(device)), strict=False)
        model.tie_weights()
        return model.eval(), json.loads(info_path.read_text())
    fx, fy = world.fact_rows(world.facts())
    lf = int((fy != -100).sum(1).max())  # facts: r s₁ s₂ o <eos> (or s₁ s₂ r o <eos>)
    fx, fy = fx[:, :lf].to(device), fy[:, :lf].to(device)
    L = max(world.cfg.generic_len + 1, cfg.recall_train_len)
    rx, ry = world.recall_rows(20_000, derive_seed(cfg.seed, "recall-train"), cfg.recall_train_len)
    rx, ry = _pad(rx, L, 0).to(device), _pad(ry, L, -100).to(device)
    gx, gy = world.generic_rows(world.generic(5_000, derive_seed(cfg.seed, "generic-train")))
    gx, gy = _pad(gx, L, 0)[:, :L].to(device), _pad(gy, L, -100)[:, :L].to(device)
    facts = world.facts()
    probe = world.recall(cfg.n_recall_eval, derive_seed(cfg.seed, "recall-stop"))  # not the evaluation probes
    nf, nr, ng = cfg.fact_rows, cfg.recall_rows, cfg.generic_rows
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.train_lr, betas=(0.9, 0.95), weight_decay=0.0)
    for grp in opt.param_groups:
        grp["initial_lr"] = cfg.train_lr
    sched = warmup_cosine_schedule(opt, min(100, cfg.train_steps // 10), cfg.train_steps, 0.1)
    t = time.process_time()
    trace, step = [], 0
    for step in range(1, cfg.train_steps + 1):
        g = torch_generator(derive_seed(cfg.seed, "train", step))
        a = torch.randint(0, len(fx), (nf,), generator=g).to(device)
        b = torch.randint(0, len(rx), (nr,), generator=g).to(device)
        c = torch.randint(0, len(gx), (ng,), generator=g).to(device)
        l1, n1 = causal_lm_loss_sum(model, fx[a], fy[a])
        l2, n2 = causal_lm_loss_sum(model, torch.cat([rx[b], gx[c]]), torch.cat([ry[b], gy[c]]))
        ((l1 + l2) / (n1 + n2)).backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        opt.zero_grad(set_to_none=True)
        if step % cfg.eval_every == 0 or step == cfg.train_steps:
            fa, ra = (
                fact_accuracy(model, world.tokenizer, facts),
                fact_accuracy(model, world.tokenizer, probe),
            )
            model.train()
            trace.append(
                {"step": step, "loss": float((l1 + l2).detach() / (n1 + n2)), "facts": fa, "recall": ra}
            )
            log(f"[law] train step {step}: facts {fa:.3f}, recall {ra:.3f}")
            if min(fa, ra) >= cfg.train_stop_at:
                break
    info = {"cpu_s": time.process_time() - t, "steps": step, "trace": trace}
    sd = {k: v.detach().cpu().contiguous() for k, v in model.state_dict().items() if k != "lm_head.weight"}
    atomic_write_with(path, lambda tmp: save_file(sd, tmp))
    atomic_write_with(info_path, lambda tmp: Path(tmp).write_text(json.dumps(info)))
    return model.eval(), info


class Setting:
    """Everything shared by the seeds of a run: the world, the trained model, its covariances, eval sets."""

    def __init__(self, cfg, out: Path, device: str):
        self.cfg = cfg
        self.world = w = make_world(cfg)
        self.tok = w.tokenizer
        self.model, self.train = train_model(cfg, w, out / "model", device)
        self.facts = w.facts()
        # held-out tuning subjects: λ and the FT learning rates are chosen on them; never washed in an evaluation
        rng = np.random.default_rng(derive_seed(cfg.seed, "tune-subjects"))
        perm = rng.permutation(cfg.world.subjects)
        n_tune = int(round(cfg.wash_fraction * cfg.world.subjects))
        self.tune_subjects = sorted(perm[:n_tune].tolist())
        self.pool = np.sort(perm[n_tune:])
        self.lam = float(cfg.lam_grid[0])
        self.recall = w.recall(cfg.n_recall_eval, derive_seed(cfg.seed, "recall-eval"))
        self.generic = w.generic(cfg.n_generic_eval, derive_seed(cfg.seed, "generic-eval"))
        rng = np.random.default_rng(derive_seed(cfg.seed, "cov"))
        n3 = cfg.cov_rows // 3
        fi = rng.choice(len(self.facts), min(n3, len(self.facts)), replace=False)
        rows = (
            [self.facts[i].prompt + self.facts[i].target for i in fi]
            + [f.prompt + f.target for f in w.recall(n3, derive_seed(cfg.seed, "recall-cov"))]
            + w.generic(cfg.cov_rows - 2 * n3, derive_seed(cfg.seed, "generic-cov"))
        )
        self.cov = key_covariance(self.model, list(cfg.edit_layers), rows, self.tok, batch_size=256,
                                  cache_dir=out / "model")  # fmt: skip
        self.before = self.metrics(self.model, [])
        self.known = self.before["retained"]
        self.recall_known = self.before["recall"]
        tr = self.train
        log(
            f"[law] model: facts known {self.known:.3f}, recall {self.recall_known:.3f} "
            f"({tr['steps']} steps, {tr['cpu_s']:.0f} s CPU)"
        )

    def precondition(self) -> str:
        """Why washing is not meaningful on the trained model ("" when it knows enough facts and recall)."""
        cfg = self.cfg
        if self.known >= cfg.known_threshold and self.recall_known >= cfg.known_threshold:
            return ""
        return (
            f"the trained model knows {self.known:.3f} of the facts and {self.recall_known:.3f} of recall "
            f"(< {cfg.known_threshold}): washing is not meaningful"
        )

    def summary(self, ft_lr: dict) -> dict:
        """The run-level numbers (one model per run): what it knows, its training, λ and the tuned FT lr."""
        tr = self.train
        return {
            "facts_known": self.known,
            "recall_known": self.recall_known,
            "train_cpu_s": tr["cpu_s"],
            "train_steps": tr["steps"],
            "train_trace": tr["trace"],
            "lam": self.lam,
            "tune_subjects": self.tune_subjects,
            "ft_lr": ft_lr,
        }

    def split(self, subjects: list[int]):
        s = set(subjects)
        R = self.cfg.world.relations
        washed = [self.facts[i * R + r] for i in subjects for r in range(R)]
        retained = [f for i, f in enumerate(self.facts) if i // R not in s]
        return washed, retained

    def metrics(self, model, washed_subjects) -> dict:
        washed, retained = self.split(list(washed_subjects))
        return {
            "washed": fact_accuracy(model, self.tok, washed) if washed else float("nan"),
            "retained": fact_accuracy(model, self.tok, retained),
            "recall": fact_accuracy(model, self.tok, self.recall),
            "generic_loss": generic_loss(model, self.tok, self.generic),
        }

    def subset(self, tag, seed: int, fraction: float) -> list[int]:
        """``fraction`` of all subjects, drawn from those not held out for tuning."""
        rng = np.random.default_rng(derive_seed(self.cfg.seed, tag, seed))
        n = int(round(fraction * self.cfg.world.subjects))
        return sorted(rng.choice(self.pool, n, replace=False).tolist())

    def law(self, subjects, lam: float | None = None, **overrides):
        cfg = self.cfg
        m = copy.deepcopy(self.model)
        washed, _ = self.split(subjects)
        lam = self.lam if lam is None else lam
        kw = dict(lam=lam, beta_ratio=cfg.beta_ratio, steps=cfg.ascent_steps, lr=cfg.ascent_lr,
                  successive_elimination=cfg.successive_elimination, best_iterate=cfg.best_iterate, z=cfg.z)  # fmt: skip
        rep = wash(m, self.tok, washed, list(cfg.edit_layers), self.cov, **(kw | overrides))
        return m, rep

    def ablations(self, subjects) -> dict:
        """The paper's ablations of LaW (report only): no successive elimination; a random N(0, 0.001²) Δ⁰ instead of
        the MEMIT initialisation, with the same per-layer C-norm budget β_l = beta_ratio·tr(Δ⁰CΔ⁰ᵀ)/tr(C)."""
        washed, _ = self.split(subjects)
        init = memit_to_eos(self.model, self.tok, washed, list(self.cfg.edit_layers), self.cov, lam=self.lam,
                            z=self.cfg.z, apply=False)  # fmt: skip
        betas = {i: self.cfg.beta_ratio * c_ratio(d, self.cov[i].to(d)) for i, d in init.deltas.items()}
        out = {}
        for name, kw in (("no_elimination", {"successive_elimination": False}),
                         ("random_init", {"init": "random", "beta": betas})):  # fmt: skip
            m, _ = self.law(subjects, **kw)
            out[name] = self.metrics(m, subjects)
        return out

    def memit(self, subjects):
        m = copy.deepcopy(self.model)
        washed, _ = self.split(subjects)
        memit_to_eos(m, self.tok, washed, list(self.cfg.edit_layers), self.cov, lam=self.lam, z=self.cfg.z)
        return m

    def ft(self, kind: str, subjects, lr: float, stop_at: float):
        m = copy.deepcopy(self.model)
        washed, _ = self.split(subjects)
        fn = ft_unlearn if kind == "ft_ul" else ft_to_eos
        rep = fn(m, self.tok, washed, lr=lr, max_steps=self.cfg.ft_max_steps, stop_at=stop_at)
        return m, rep

    def tune(self, run_grid: Callable[[Callable[[int], dict], int, str], dict[int, dict]]) -> dict:
        """Hyper-parameters chosen on the held-out tuning subjects (never an evaluation subset), one rule for every
        method: the grid value with the best retained accuracy among those that wash the tuning facts to
        ≤ ``tune_max_washed`` (else the lowest washed accuracy). LaW: λ from ``lam_grid`` (MEMIT→EOS uses the same λ,
        it is LaW's initialisation); FT-UL / FT→EOS: lr from ``ft_lrs``, stopped at LaW's forgetting level there.
        ``run_grid(fn, n, part)`` returns ``{i: fn(i)}`` for the ``n`` grid points of the stage ``part``
        (``"tune_lam"``, ``"tune_ft"``); a run passes ``experiment.tuning_grid(rd)``, so the grid points run like seeds
        (in parallel workers with ``--jobs``, results in the run folder, resumable)."""
        subj = self.tune_subjects
        grid = list(self.cfg.lam_grid)

        res = run_grid(lambda i: self.metrics(self.law(subj, grid[i])[0], subj), len(grid), "tune_lam")
        table = {lam: res[i] for i, lam in enumerate(grid)}
        ok = [lam for lam in table if table[lam]["washed"] <= self.cfg.tune_max_washed]
        if ok:
            self.lam = max(ok, key=lambda lam: (table[lam]["retained"], lam))
        else:
            self.lam = min(table, key=lambda lam: (table[lam]["washed"], -table[lam]["retained"]))
        target = table[self.lam]["washed"]
        chosen = {"lam": self.lam, "lam_table": {str(k): v for k, v in table.items()}}
        jobs = [(kind, lr) for kind in ("ft_ul", "ft_eos") for lr in self.cfg.ft_lrs]

        def ft_point(i):
            kind, lr = jobs[i]
            mm, rep = self.ft(kind, subj, lr, target)
            return self.metrics(mm, subj) | {"reached": float(rep.stopped_at_target), "steps": rep.steps}

        res = run_grid(ft_point, len(jobs), "tune_ft")
        for kind in ("ft_ul", "ft_eos"):
            scores = []
            for i, (k, lr) in enumerate(jobs):
                if k == kind:
                    met = res[i]
                    reached = bool(met["reached"])
                    scores.append((reached, met["retained"] if reached else -met["washed"], lr))
            chosen[kind] = max(scores)[2]
            chosen[f"{kind}_table"] = {str(sc[2]): {"reached": sc[0], "score": sc[1]} for sc in scores}
        return chosen
