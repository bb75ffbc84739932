"""Reproduction of LaW (Large Scale Knowledge Washing) in a small world.

1. Build a world of subjects with unique last tokens and relational facts ``r f u → o`` (relation first, so the
   subject's last token — where MEMIT/LaW read keys — is where the answer is produced), an in-context associative
   recall task (reasoning that needs no stored fact) and Markov-chain generic text; train one tiny Llama on it
   (``iclr25.common.lm`` + ``common.train``) until facts and recall are known (≥ ``known_threshold``, else the run
   is invalid). One model is trained per run (CPU budget); the seeds vary the washed subset.
2. Per seed, wash all facts of ``wash_fraction`` of the subjects with LaW (MEMIT→EOS initialisation, C-norm
   constrained ascent, successive elimination), MEMIT→EOS alone, FT-UL (gradient ascent) and FT→EOS; the two
   fine-tuning baselines stop at the forgetting level LaW reached (matched forgetting) with their lr chosen from
   the same grid on a held-out tuning subset, and share one step budget.
3. Measure washed accuracy, retained accuracy (facts of the other subjects), recall accuracy and generic loss;
   sweep the washed fraction for LaW and MEMIT→EOS; LaW's ablations (no successive elimination, random Δ⁰) on the
   same subsets (report only).
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

import numpy as np

from iclr25.common.claims import Claim, all_of, explain_failures, make_claim
from iclr25.common.device import get_device
from iclr25.common.results import aggregate, values
from iclr25.harness.rundir import RunDir, RunResult

from . import real, report
from .config import METHODS, PRESETS, Config, RealConfig
from .setting import Setting

__all__ = [
    "Config",
    "METHODS",
    "PRESETS",
    "RealConfig",
    "claims",
    "one_seed",
    "run",
]  # the config names re-exported for the registry


# the per-seed keys the claims and their failure notes read (every method's washed accuracy, the retained accuracy
# and reasoning deltas they compare, the EOS NLL reached by z)
REQUIRED = (
    "law/washed", "memit/washed", "ft_ul/washed", "ft_eos/washed", "law/retained", "ft_ul/retained",
    "ft_eos/retained", "law/recall_drop", "ft_ul/recall_drop", "law/generic_increase", "ft_ul/generic_increase",
    "law/z_nll",
)  # fmt: skip

# -- one seed ----------------------------------------------------------------------------------------------


def tuning_grid(rd: RunDir):
    """``Setting.tune``'s grid points computed like seeds: ``run_grid(fn, n, part)`` maps ``fn`` over ``range(n)``
    through ``rd.map_seeds`` (parallel workers with ``--jobs``, results in ``rd``, resumable)."""

    def run_grid(fn, n, part):
        # the keys the choice rule reads from each grid point (washed, retained; FT's reached flag)
        return rd.map_seeds(
            fn,
            list(range(n)),
            desc=part,
            part=part,
            required=("washed", "retained") + (("reached",) if part == "tune_ft" else ()),
        )

    return run_grid


def seed_main(st: Setting, seed: int, ft_lr: dict) -> dict:
    """One seed's comparison on its washed subset: LaW, MEMIT→EOS, FT-UL and FT→EOS at matched forgetting."""
    cfg = st.cfg
    subj = st.subset("wash", seed, cfg.wash_fraction)
    res: dict = {"before": st.metrics(st.model, subj), "washed_subjects": subj}
    t = time.perf_counter()
    m, rep = st.law(subj)
    res["law"] = st.metrics(m, subj) | {"time_s": time.perf_counter() - t}
    res["law_layers"] = rep.summary()["layers"]
    # EOS target NLL reached by z (the edit can only wash if this is small); NaN when no fact was known
    res["law"]["z_nll"] = float("nan") if rep.z_nll is None else rep.z_nll
    t = time.perf_counter()
    res["memit"] = st.metrics(st.memit(subj), subj) | {"time_s": time.perf_counter() - t}
    target = res["law"]["washed"]
    for kind in ("ft_ul", "ft_eos"):
        t = time.perf_counter()
        mm, r = st.ft(kind, subj, ft_lr[kind], target)
        res[kind] = st.metrics(mm, subj) | {
            "time_s": time.perf_counter() - t, "steps": r.steps, "reached_target": float(r.stopped_at_target),
            "lr": ft_lr[kind],
        }  # fmt: skip
    for k in METHODS:
        res[k]["recall_drop"] = res["before"]["recall"] - res[k]["recall"]
        res[k]["generic_increase"] = res[k]["generic_loss"] - res["before"]["generic_loss"]
    return res


def seed_extras(st: Setting, seed: int) -> dict:
    """One seed's report-only parts: LaW's ablations on the same subset and the washed-fraction sweep."""
    cfg = st.cfg
    res: dict = {"sweep": {}}
    if cfg.ablations:
        res["ablation"] = st.ablations(st.subset("wash", seed, cfg.wash_fraction))
    for f in cfg.sweep_fractions:
        s2 = st.subset("sweep", seed * 1000 + int(100 * f), f)
        m, _ = st.law(s2)
        res["sweep"][f"{int(round(100 * f))}pct"] = {
            "law": st.metrics(m, s2),
            "memit": st.metrics(st.memit(s2), s2),
        }
    return res


def _merge(main: dict, extras: dict, cfg: Config) -> dict:
    res = dict(main) | {k: v for k, v in extras.items() if k != "sweep"}
    sweep = {f"{int(round(100 * cfg.wash_fraction))}pct": {"law": main["law"], "memit": main["memit"]}}
    res["sweep"] = dict(sorted((sweep | extras["sweep"]).items(), key=lambda kv: int(kv[0][:-3])))
    return res


def one_seed(cfg: Config, seed: int, st: Setting | None = None, ft_lr: dict | None = None) -> dict:
    """One seed: the main comparison (:func:`seed_main`) and the report-only extras (:func:`seed_extras`) on its
    washed subset, merged. ``st`` (the run's trained model and covariances) and ``ft_lr`` (the tuned FT learning
    rates) are shared by the seeds of a run, which builds them once and passes them in; given neither, both are built
    here in a temporary folder (the same numbers as in a run of ``cfg``). A ``RealConfig`` loads its model and facts
    here (real.py)."""
    if isinstance(cfg, RealConfig):
        data = real.load_real(cfg, Path(tempfile.mkdtemp(prefix="law-real-")))
        return real.one_seed(cfg, data, real.base_metrics(data), seed, {})
    if st is None:
        tmp = Path(tempfile.mkdtemp(prefix="law-"))
        st = Setting(cfg, tmp, str(get_device(cfg.device)))
    if ft_lr is None:
        ft_lr = st.tune(tuning_grid(RunDir(Path(tempfile.mkdtemp(prefix="law-tune-")), cfg)))
    return _merge(seed_main(st, seed, ft_lr), seed_extras(st, seed), cfg)


def required_keys(cfg: Config) -> tuple[str, ...]:
    """The per-seed keys the claims and their failure notes read (a ``RealConfig``: real.py's declaration)."""
    if isinstance(cfg, RealConfig):
        return real.required_keys(cfg)
    return REQUIRED


# -- claims ---------------------------------------------------------------------------------------------------


def claims(cfg: Config, per_seed: dict, precondition: str = "") -> list[Claim]:
    """The three claims (ids and thresholds fixed). ``precondition`` is ``Setting.precondition()``: when it names a
    problem the claims say they are not meaningful; otherwise each failed claim carries its measured reason."""
    if isinstance(cfg, RealConfig):
        return real.claims(cfg, per_seed)
    if precondition:
        return _claims(per_seed, "precondition not reached (the claims are not meaningful): " + precondition)
    return explain_failures(_claims(per_seed, ""), _failure_notes(per_seed))


def _claims(ps: dict, valid_note: str) -> list[Claim]:
    v = lambda k: values(ps, k)  # noqa: E731
    washed = make_claim(
        "washed", "LaW washes the targeted facts: washed-fact accuracy ≤ 0.2 (mean over seeds)",
        "law/washed", v("law/washed"), 0.2, "<=", note=valid_note,
    )  # fmt: skip
    retained = all_of(
        "retained",
        "LaW keeps the other subjects' facts: retained accuracy ≥ 0.6 and ≥ FT-UL's + 0.3 at matched forgetting",
        [
            make_claim(
                "retained_abs", "LaW retained accuracy ≥ 0.6", "law/retained", v("law/retained"), 0.6, ">="
            ),
            make_claim(
                "retained_vs_ftul",
                "LaW retained − FT-UL retained ≥ 0.3 (means)",
                "law/retained − ft_ul/retained",
                v("law/retained"),
                0.3,
                ">=",
                baseline=v("ft_ul/retained"),
                compare="difference",
            ),
        ],  # fmt: skip
        note=valid_note,
    )
    reasoning = all_of(
        "reasoning_kept",
        "LaW keeps reasoning: recall-accuracy drop ≤ 0.03 and generic-loss increase ≤ 0.05 nats, every seed",
        [
            make_claim(
                "recall_drop",
                "recall accuracy drop ≤ 0.03",
                "law/recall_drop",
                v("law/recall_drop"),
                0.03,
                "<=",
                reduce="all",
            ),  # fmt: skip
            make_claim(
                "generic_increase",
                "generic loss increase ≤ 0.05 nats",
                "law/generic_increase",
                v("law/generic_increase"),
                0.05,
                "<=",
                reduce="all",
            ),  # fmt: skip
        ],
        note=valid_note,
    )
    return [washed, retained, reasoning]


def _failure_notes(ps: dict) -> dict[str, str]:
    """A measured explanation for each claim, attached where it fails (kept failing, never tuned away)."""
    v = lambda k: float(np.mean(values(ps, k)))  # noqa: E731
    why = {
        "washed": f"LaW leaves {v('law/washed'):.2f} of the washed facts answered (MEMIT→EOS {v('memit/washed'):.2f}, "
        f"FT-UL {v('ft_ul/washed'):.2f}, FT→EOS {v('ft_eos/washed'):.2f}); facts still answered after each LaW "
        f"layer (mean over seeds): {_remaining(ps)}; EOS NLL reached by z {v('law/z_nll'):.2f} nats.",
        "retained": f"LaW retained {v('law/retained'):.2f}, FT-UL {v('ft_ul/retained'):.2f}, FT→EOS "
        f"{v('ft_eos/retained'):.2f} at matched forgetting.",
        "reasoning_kept": f"recall drop LaW {v('law/recall_drop'):.3f} (FT-UL {v('ft_ul/recall_drop'):.3f}); generic-"
        f"loss increase LaW {v('law/generic_increase'):.3f} nats (FT-UL {v('ft_ul/generic_increase'):.3f}).",
    }
    return why


def _remaining(ps: dict) -> list[float]:
    n = min(len(p["law_layers"]) for p in ps.values())
    return [float(np.mean([p["law_layers"][i]["remaining_after"] for p in ps.values()])) for i in range(n)]


def run(cfg: Config, out: Path) -> RunResult:
    if isinstance(cfg, RealConfig):  # a pretrained LM and real facts (real.py)
        return real.run(cfg, out)
    rd = RunDir(Path(out), cfg, required=required_keys(cfg))
    st = Setting(cfg, rd.path, str(get_device(cfg.device)))
    ft_lr = st.tune(tuning_grid(rd))
    per_seed = rd.map_seeds(lambda s: one_seed(cfg, s, st, ft_lr), cfg.seed_list, desc="law seeds")
    model, reason = st.summary(ft_lr), st.precondition()
    return RunResult(
        seeds=cfg.seed_list, metrics=aggregate(per_seed) | {"model": model}, claims=claims(cfg, per_seed, reason),
        per_seed=per_seed, figures=[report.figure(cfg, per_seed, rd.figures / "law_washing.png")],
        report_md=report.report_md(cfg, per_seed, model), valid=not reason, invalid_reason=reason,
    )  # fmt: skip
