"""The LaW reproduction's settings (README, "Reproduction"): :class:`Config` (the generated world and the tiny model
trained in the run), :class:`RealConfig` (the ``real`` and ``full`` presets, ``real.py``), their :data:`PRESETS`, the
compared methods and the real preset's relations and fact tests (read by ``experiment.py``, ``real.py`` and
``report.py``)."""

from __future__ import annotations

from dataclasses import dataclass, replace

from iclr25.common.fields import bounded, check_nested
from iclr25.common.results import ExperimentConfig

from .memit import ZConfig
from .world import WorldConfig

METHODS = ("law", "memit", "ft_ul", "ft_eos")
# WorldConfig.seed: make_world sets it from the run's seed; Config.world keeps the default
_WORLD_SEED = WorldConfig().seed


@dataclass(frozen=True)
class Config(ExperimentConfig):
    # the world, every WorldConfig field, set with dotted overrides (``--set world.subjects=500``). Prompts are
    # "r s₁ s₂" → o (relation_first, like "The capital of | France"): the subject's last token, where MEMIT/LaW read
    # the key, is where the answer is produced. With "s₁ s₂ r" a 3–4-layer model looks facts up at the relation token
    # and no δ at the subject (clamp 3‖h₀‖, 300 steps) makes it emit EOS (target NLL 4–11 nats): nothing can be
    # washed. world.recall_values must equal world.recall_keys; world.seed is the run's seed (set in make_world).
    world: WorldConfig = WorldConfig(
        subjects=300,
        first_names=20,
        relations=4,
        objects=40,
        recall_keys=8,
        recall_values=8,
        recall_pairs=2,
        generic_states=32,
        generic_len=12,
        relation_first=True,
    )
    # model and its training (one model per run)
    arch: str = "llama"
    hidden: int = bounded(64, lo=1)
    layers: int = bounded(4, lo=1)
    heads: int = bounded(4, lo=1)
    # at most: training stops early once facts and recall reach train_stop_at
    train_steps: int = bounded(3000, lo=1)
    train_lr: float = bounded(3e-3, lo=0)
    fact_rows: int = bounded(48, lo=1)  # per training batch: fact rows, recall rows, generic-text rows
    recall_rows: int = bounded(32, lo=1)
    generic_rows: int = bounded(8, lo=0)
    # recall training rows: the pairs, then queried pairs up to this length
    recall_train_len: int = bounded(16, lo=1)
    eval_every: int = bounded(100, lo=1)
    # early stop (on a separate recall probe set) a little above known_threshold
    train_stop_at: float = bounded(0.99, lo=0, hi=1, lo_open=True)
    known_threshold: float = bounded(0.98, lo=0, hi=1, lo_open=True)
    # editing (LaW / MEMIT→EOS); λ chosen from lam_grid on held-out tuning subjects (the official band search
    # drives λ to 1e4–1e5 on small models)
    edit_layers: tuple[int, ...] = bounded((0, 1), lo=0, each=True)  # each also < layers (below)
    lam_grid: tuple[float, ...] = bounded(
        (10.0, 100.0, 1000.0, 10000.0), kind=float, lo=0, lo_open=True, each=True
    )
    # tuning rule: the best retained accuracy among grid values washing to ≤ this
    tune_max_washed: float = bounded(0.2, lo=0, hi=1, lo_open=True)
    # MEMIT's target-vector optimisation, every ZConfig field (``--set z.steps=100``): steps official 20, clamp
    # official 0.75; z.kl_factor stays 0 (the world has no "{subject} is a" prompt to anchor the KL term on)
    z: ZConfig = ZConfig(steps=60, lr=0.5, clamp=3.0, weight_decay=0.5, kl_factor=0.0)
    beta_ratio: float = bounded(1.1, lo=1)
    ascent_steps: int = bounded(1000, lo=1)
    ascent_lr: float = bounded(1e-4, lo=0)
    successive_elimination: bool = True
    best_iterate: str = "paper"
    ablations: bool = True  # report only: LaW without successive elimination / from a random Δ⁰ (same β)
    cov_rows: int = bounded(1800, lo=1)
    wash_fraction: float = bounded(0.1, lo=0, hi=0.5, lo_open=True)  # ≤ 0.5: tuning subjects are held out
    sweep_fractions: tuple[float, ...] = (0.25, 0.5)
    # fine-tuning baselines: same lr grid (chosen on a held-out tuning subset), same max steps
    ft_lrs: tuple[float, ...] = bounded((1e-4, 3e-4, 1e-3), kind=float, lo=0, lo_open=True, each=True)
    ft_max_steps: int = bounded(100, lo=1)
    # evaluation
    n_recall_eval: int = bounded(500, lo=1)
    n_generic_eval: int = bounded(300, lo=1)

    def __post_init__(self) -> None:
        super().__post_init__()  # the bounds declared above (tuples element-wise); below: rules across fields
        check_nested(self, "world", WorldConfig)
        check_nested(self, "z", ZConfig)
        if self.world.seed != _WORLD_SEED:
            raise ValueError(
                f"world.seed is the run's seed (make_world sets it from seed); leave it at {_WORLD_SEED!r} and set "
                f"seed instead, got {self.world.seed!r}"
            )
        if self.world.recall_values != self.world.recall_keys:
            raise ValueError(
                f"world.recall_values must equal world.recall_keys (the recall task has as many values as keys), "
                f"got {self.world.recall_values!r} and {self.world.recall_keys!r}"
            )
        if self.z.kl_factor != 0:
            raise ValueError(
                f"z.kl_factor must stay 0 (the world has no '{{subject}} is a' prompt to anchor the KL term on), "
                f"got {self.z.kl_factor!r}"
            )
        for f in self.sweep_fractions:
            if not 0 < f <= 1 - self.wash_fraction:
                raise ValueError(
                    f"sweep_fractions must lie in (0, 1 - wash_fraction] (the tuning subjects are held out), "
                    f"got {self.sweep_fractions!r}"
                )
        if any(i >= self.layers for i in self.edit_layers):
            raise ValueError(f"edit_layers must be indices in [0, {self.layers}), got {self.edit_layers!r}")
        if int(round(self.wash_fraction * self.world.subjects)) < 1:
            raise ValueError(
                f"wash_fraction × world.subjects must be ≥ 1, got {self.wash_fraction} × {self.world.subjects}"
            )
        if self.hidden % self.heads:
            raise ValueError(f"hidden ({self.hidden}) must be divisible by heads ({self.heads})")


PRESETS = {
    "smoke": Config(
        world=replace(Config.world, subjects=40, first_names=6, objects=12, generic_states=12),
        recall_train_len=16,
        hidden=32,
        layers=3,
        heads=2,
        train_steps=250,
        train_lr=1e-2,
        fact_rows=24,
        recall_rows=16,
        eval_every=50,
        lam_grid=(10.0, 1000.0),
        z=replace(Config.z, steps=30),
        ascent_steps=50,
        cov_rows=200,
        sweep_fractions=(0.5,),
        ft_lrs=(1e-3,),
        ft_max_steps=20,
        n_recall_eval=100,
        n_generic_eval=50,
        seeds=2,
        known_threshold=0.98,
    ),  # fmt: skip
    "quick": Config(),
}


# the real preset's relations (real.py builds their facts) and its fact tests (real.known_fn)
GEO_RELATIONS = ("capital", "capital_of", "currency", "city_state")
RELATIONS = GEO_RELATIONS + ("hypernym", "antonym", "family")
KNOWN_RULES = ("starts", "generate10")
_REAL_RELATIONS = RELATIONS + ("counterfact",)


@dataclass(frozen=True)
class RealConfig(Config):
    """The ``real`` / ``full`` presets (``real.py``): wash facts a pretrained LM really knows. A subclass of the small
    world's Config (the run contract) whose world, tiny-model, tuning-grid and sweep fields are not used; the LaW
    fields it shares (``edit_layers``, ``beta_ratio``, ``ascent_steps``, ``ascent_lr``) get the paper's values."""

    # an asset name (SmolLM2), a local save_pretrained folder or a hub id (``full``: the paper's GPT2-XL)
    model: str = "smollm2-135m-instruct"
    # the paper's fact set by datasets name (``full``: CounterFact), or a local .parquet / .jsonl file with its
    # columns; "" = none (the real preset's relations only). Its facts form the relation "counterfact"
    facts_dataset: str = ""
    facts_split: str = "train"
    # the fact test (real.known_fn): "starts" = the greedy continuation starts with the answer; "generate10" = the
    # official test, the answer inside 10 greedy tokens
    known_rule: str = bounded("starts", choices=KNOWN_RULES)
    # what ``full`` would download and its size (shown by ``iclr25 config law --preset full``; informational)
    downloads: tuple[str, ...] = ()
    edit_layers: tuple[int, ...] = bounded((3, 4, 5, 6, 7), lo=0, each=True)
    # LaW: the paper's GPT2-XL zsRE / CounterFact defaults (λ₀ 20,000, lr 1e-7, 1,000 steps, β 1.1×)
    lam: float = bounded(20_000.0, lo=0)
    ascent_steps: int = bounded(1000, lo=0)
    ascent_lr: float = bounded(1e-7, lo=0)
    beta_ratio: float = bounded(1.1, lo=1)
    scales: tuple[int, ...] = bounded((64, 256), lo=1, each=True)  # washed facts per seed (nested sets)
    # the five relations with the most known facts are washed (WordNet antonyms hold most of them); currency and
    # family (few known facts each) stay the never-washed other relations
    washed_relations: tuple[str, ...] = bounded(
        ("capital", "capital_of", "city_state", "hypernym", "antonym"), choices=_REAL_RELATIONS, each=True
    )
    other_relations: tuple[str, ...] = bounded(("currency", "family"), choices=_REAL_RELATIONS, each=True)
    heldout_frac: float = bounded(
        0.25, lo=0, hi=1, lo_open=True, hi_open=True
    )  # of each washed relation's facts
    max_heldout: int = bounded(40, lo=1)  # held-out facts evaluated per relation
    wn_stride: int = bounded(8, lo=1)  # WordNet hypernym candidates: every wn_stride-th eligible noun synset
    wn_candidates: int = bounded(1200, lo=0)
    gram_per_section: int = bounded(8, lo=1)  # few-shot queries per grammatical section (nine sections)
    gram_shots: int = bounded(3, lo=1)
    ppl_passages: int = bounded(8, lo=1)  # held-out Wikipedia passages for perplexity
    ppl_chars: int = bounded(600, lo=50)
    cov_passages: int = bounded(56, lo=1)  # Shakespeare passages for C = E[kkᵀ]
    cov_chars: int = bounded(1200, lo=50)
    cov_max_tokens: int = bounded(256, lo=8)
    # FT-UL on the same W_out matrices (Adam, full batch), stopped at LaW's washed accuracy
    ft_lr: float = bounded(1e-4, lo=0, lo_open=True)
    ft_max_steps: int = bounded(30, lo=1)
    # one BLAS thread per worker process: the run's tasks (the load's known-fact filter and C, z per seed, then each
    # (seed, scale) wash) run in two worker processes on the two cores (--jobs 2); two threads in one process beside
    # any other busy process stall at OpenMP barriers (seed 0's z stage ran ~5x slower)
    threads: int | None = 1

    def __post_init__(self) -> None:
        ExperimentConfig.__post_init__(
            self
        )  # declared bounds; the small world's cross-field rules do not apply
        if not self.model.strip():
            raise ValueError(f"model must name an asset, a folder or a hub id, got {self.model!r}")
        if set(self.washed_relations) & set(self.other_relations):
            raise ValueError(
                f"washed_relations and other_relations must not share a relation, got {self.washed_relations!r} "
                f"and {self.other_relations!r}"
            )
        if "counterfact" in self.washed_relations + self.other_relations and not self.facts_dataset:
            raise ValueError(
                "the relation 'counterfact' needs facts_dataset (a datasets name or a local file)"
            )
        if len(set(self.scales)) != len(self.scales):
            raise ValueError(f"scales must be distinct, got {self.scales!r}")


PRESETS["real"] = RealConfig()
PRESETS["full"] = RealConfig(
    model="gpt2-xl",
    facts_dataset="azhx/counterfact",
    downloads=(
        "model gpt2-xl (Hugging Face hub, 1.5B parameters, fp32 safetensors about 6.4 GB)",
        "dataset azhx/counterfact (Hugging Face hub mirror of CounterFact, 21,919 records; tens of MB, size not "
        "measured here)",
    ),
    edit_layers=(13, 14, 15, 16, 17),
    scales=(1000, 4000),
    washed_relations=("counterfact",),
    other_relations=("capital", "capital_of", "currency", "city_state", "hypernym"),
    max_heldout=500,
    gram_per_section=30,
    ppl_passages=200,
    cov_passages=5000,
    ft_max_steps=100,
    device="cuda",
    threads=None,
)
