"""One entry per system: slug, paper, authors, arXiv id, headline claim and the runner.

Every registered system has its runner ``iclr25.<slug>.experiment`` (``Config``, ``PRESETS``, ``one_seed``,
``claims``, ``run``; ``tests/test_contract.py`` checks them); the runner is imported only when the system is run.

Each system names the optional extra its code imports (``extra``; ``""`` = the core dependencies suffice).
:attr:`System.missing_extra` tells, without importing anything heavy (``importlib.util.find_spec`` on the
extra's top-level modules), whether that extra is installed; running a system whose extra is missing raises
:class:`MissingExtraError` with the one ``pip install`` line that fixes it.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

from .errors import UsageError

_PKG_DIR = Path(__file__).resolve().parent

# The top-level modules each optional extra of pyproject.toml provides (what `find_spec` checks). The extras
# themselves are declared in pyproject.toml; tests/test_extras.py checks that the two agree and that every
# system's third-party imports are covered by the core dependencies plus its extra.
EXTRAS: dict[str, tuple[str, ...]] = {
    "llm": (
        "peft",
        "datasets",
        "data_selection",
        "trl",
        "sacrebleu",
        "gguf",
        "huggingface_hub",
        "pyarrow",
        "bitsandbytes",
    ),
    "rl": ("gymnasium", "mujoco"),
    "chem": ("pymatgen",),
    "vision": ("PIL", "corrupt_tta"),
    "audio": ("soundfile", "soxr", "torchmetrics", "librosa", "pandas", "datasets", "audiomentations"),
    "text": ("gensim",),
    "stats": ("ot",),
    "agents": ("jsonschema", "openai"),
    "generative": ("diffusers", "skimage"),
    "human": ("gsplat", "torchmetrics", "PIL", "diffusers"),
    "cluster": ("submitit",),
    "safety": ("safety_gymnasium",),
}


def install_hint(extra: str) -> str:
    """The command that installs ``extra`` (``pip install 'iclr25[rl]'``)."""
    return f"pip install 'iclr25[{extra}]'" if extra else "pip install iclr25"


def _module_present(name: str) -> bool:
    """Whether the top-level module ``name`` can be imported (found on ``sys.path``; nothing is imported)."""
    if name in sys.modules:
        return sys.modules[name] is not None  # ``None`` there means "import blocked" (as Python treats it)
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


class DependencyVersionError(ImportError):
    """An installed dependency is older than a system's code path needs (the message names both versions)."""


class MissingExtraError(ImportError):
    """A system's optional extra is not installed; the message is the one line that says what to install."""

    def __init__(self, slug: str, extra: str, missing: list[str] | tuple[str, ...]):
        self.slug, self.extra, self.missing = slug, extra, tuple(missing)
        what = ", ".join(repr(m) for m in self.missing)
        need = f"the [{extra}] extra" if extra else "its core dependencies"
        super().__init__(f"{slug} needs {need} (no module {what}): {install_hint(extra)}")


@dataclass(frozen=True)
class System:
    slug: str
    title: str
    authors: str
    arxiv: str
    claim: str  # the paper's headline claim, in one sentence
    runner: str = ""  # the experiment module; default ``iclr25.<slug>.experiment``
    extra: str = ""  # the optional extra its code imports (a key of EXTRAS); "" = core dependencies only
    numpy_only: bool = False  # computes with numpy/scipy alone: no accelerator is ever used
    real_preset: bool = (
        False  # PRESETS has a `real` preset (real models/data from iclr25.assets; contract-tested)
    )

    @property
    def assets(self) -> tuple:
        """The real assets this system's code and real preset use (``iclr25.assets.catalog``; nothing fetched)."""
        from .assets.catalog import for_system

        return for_system(self.slug)

    @property
    def real_status(self) -> str:
        """What ``iclr25 list`` shows in its ``real`` column: ``—`` without a real preset; otherwise whether its
        assets are in the cache (sizes checked, not digests: ``iclr25 assets list`` checks those)."""
        if not self.real_preset:
            return "—"
        from .assets.store import status

        missing = [a.name for a in self.assets if status(a, deep=False).state != "present"]
        return "assets present" if not missing else f"needs {', '.join(missing)}"

    @property
    def module(self) -> str:
        return self.runner or f"iclr25.{self.slug}.experiment"

    @property
    def missing_modules(self) -> tuple[str, ...]:
        """The top-level modules of the system's extra that cannot be found (none imported)."""
        return tuple(m for m in EXTRAS.get(self.extra, ()) if not _module_present(m))

    @property
    def missing_extra(self) -> str:
        """The extra to install before this system can run (``""`` when nothing is missing)."""
        return self.extra if self.extra and self.missing_modules else ""

    @property
    def availability(self) -> str:
        """What ``iclr25 list`` shows: ``ready``, or ``needs [extra]`` when its extra is not installed."""
        return f"needs [{self.missing_extra}]" if self.missing_extra else "ready"

    @property
    def url(self) -> str:
        return f"https://arxiv.org/abs/{self.arxiv}" if self.arxiv else ""

    def experiment(self) -> ModuleType:
        """The system's ``experiment`` module (``Config``, ``PRESETS``, ``run``)."""
        missing = self.missing_modules
        if missing:
            raise MissingExtraError(self.slug, self.extra, missing)
        try:
            return importlib.import_module(self.module)
        except ModuleNotFoundError as e:  # a third-party module of the system (or of a dependency) is absent
            top = (e.name or "").split(".")[0]
            if not top or top == "iclr25":
                raise
            raise MissingExtraError(self.slug, self.extra, [top]) from e


SYSTEMS: tuple[System, ...] = (
    System(
        "pds",
        "Data Selection via Optimal Control for Language Models",
        "Yuxian Gu, Li Dong, Hongning Wang, Yaru Hao, Qingxiu Dong, Furu Wei, Minlie Huang",
        "2410.07064",
        "Selecting pre-training data with PMP-derived scores accelerates LM training about 2x and lowers final loss.",
        extra="llm",
        real_preset=True,
    ),
    System(
        "topic_unlearning",
        "Provable unlearning in topic modeling and downstream tasks",
        "Stanley Wei, Sadhika Malladi, Sanjeev Arora, Amartya Sanyal",
        "2411.12600",
        "Anchor-word topic models can provably unlearn documents at a cost independent of corpus size, and a "
        "downstream head can unlearn more documents than the base model.",
        extra="text",
        numpy_only=True,
        real_preset=True,
    ),
    System(
        "transformer2",
        "Transformer-Squared: Self-adaptive LLMs",
        "Qi Sun, Edoardo Cetin, Yujin Tang",
        "2501.06252",
        "Singular-value fine-tuning experts trained with RL, dispatched in a two-pass inference, adapt an LLM to "
        "unseen tasks with far fewer parameters than LoRA.",
        extra="llm",
        real_preset=True,
    ),
    System(
        "quantum_peft",
        "Quantum-PEFT: Ultra parameter-efficient fine-tuning",
        "Toshiaki Koike-Akino, Francesco Tonin, Yongtao Wu, Frank Zhengqing Wu, Leyla Naz Candogan, Volkan Cevher",
        "2503.05431",
        "Pauli-parameterised unitary adapters need logarithmically many parameters in the layer width and stay "
        "competitive with LoRA.",
        extra="llm",
        real_preset=True,
    ),
    System(
        "fosp",
        "FOSP: Fine-tuning Offline Safe Policy through World Models",
        "Chenyang Cao, Yucheng Xin, Silang Wu, Longxiang He, Zichen Yan, Junbo Tan, Xueqian Wang",
        "2407.04942",
        "An offline-pretrained safe world-model policy fine-tunes online with fewer constraint violations.",
        extra="rl",
    ),
    System(
        "dst_robustness",
        "Dynamic Sparse Training versus Dense Training: The Unexpected Winner in Image Corruption Robustness",
        "Boqian Wu, Qiao Xiao, Shunxin Wang, Nicola Strisciuglio, Mykola Pechenizkiy, Maurice van Keulen, "
        "Decebal Constantin Mocanu, Elena Mocanu",
        "2410.03030",
        "Dynamic sparse training at low sparsity is more robust to image corruptions than dense training.",
        extra="vision",
        real_preset=True,
    ),
    System(
        "pfes_gim",
        "Gaussian-Based Instance-Adaptive Intensity Modeling for Point-Supervised Facial Expression Spotting",
        "Yicheng Deng, Hideaki Hayashi, Hajime Nagahara",
        "2511.16952",
        "Gaussian instance-adaptive intensity modelling with point labels spots facial expressions nearly as well "
        "as full supervision.",
    ),
    System(
        "law",
        "Large Scale Knowledge Washing",
        "Yu Wang, Ruihan Wu, Zexue He, Xiusi Chen, Julian McAuley",
        "2405.16720",
        "Editing a few MLP matrices removes a very large set of facts while preserving reasoning ability.",
        extra="llm",  # the real preset's corpora (datasets.Dataset) and the full preset's CounterFact
        real_preset=True,
    ),
    System(
        "improver",
        "ImProver: Agent-Based Automated Proof Optimization",
        "Riyaz Ahuja, Jeremy Avigad, Prasad Tetali, Sean Welleck",
        "2410.04753",
        "An LLM agent rewrites Lean proofs to be shorter and more declarative while keeping them correct.",
    ),
    System(
        "scope_faithfulness",
        "SCOPE: A Self-supervised Framework for Improving Faithfulness in Conditional Text Generation",
        "Song Duong, Florian Le Bronnec, Alexandre Allauzen, Vincent Guigue, Alberto Lumbreras, Laure Soulier, "
        "Patrick Gallinari",
        "2502.13674",
        "Preference tuning against self-generated unfaithful samples makes conditional generation more faithful.",
        extra="llm",
    ),
    System(
        "ohio",
        "Offline Hierarchical Reinforcement Learning via Inverse Optimization",
        "Carolin Schmidt, Daniele Gammelli, James Harrison, Marco Pavone, Filipe Rodrigues",
        "2410.07933",
        "Inverting a known low-level policy recovers high-level actions from flat data, so off-the-shelf offline "
        "RL learns hierarchical policies that transfer.",
        extra="rl",
        real_preset=True,
    ),
    System(
        "freevs",
        "FreeVS: Generative View Synthesis on Free Driving Trajectory",
        "Qitai Wang, Lue Fan, Yuqi Wang, Yuntao Chen, Zhaoxiang Zhang",
        "2410.18079",
        "A pseudo-image-conditioned video diffusion model synthesises camera views on trajectories off the "
        "recorded one.",
        extra="generative",
    ),
    System(
        "cascading_kv",
        "Training-Free Exponential Context Extension via Cascading KV Cache",
        "Jeffrey Willette, Heejun Lee, Youngwan Lee, Myeongjae Jeon, Sung Ju Hwang",
        "2406.17808",
        "Cascading sub-caches that accept tokens at exponentially spaced rates keep important tokens far beyond a "
        "sliding window, with linear-cost prefill.",
        extra="llm",  # the real preset's Shakespeare (datasets.Dataset) and the full preset's PG19
        real_preset=True,
    ),
    System(
        "tool_planner",
        "Tool-Planner: Task Planning with Clusters across Multiple Tools",
        "Yanming Liu, Xinyue Peng, Jiannan Cao, Shi Bo, Yuwei Zhang, Xuhong Zhang, Sheng Cheng, Xun Wang, "
        "Jianwei Yin, Tianyu Du",
        "2406.03807",
        "Planning over clusters of functionally similar tools raises pass rate and cuts replanning cost.",
        extra="agents",
        real_preset=True,
    ),
    System(
        "birdset",
        "BirdSet: A Large-Scale Dataset for Audio Classification in Avian Bioacoustics",
        "Lukas Rauch, Raphael Schwinger, Moritz Wirth, René Heinrich, Denis Huseljic, Marek Herde, Jonas Lange, "
        "Stefan Kahl, Bernhard Sick, Sven Tomforde, Christoph Scholz",
        "2403.10380",
        "A benchmark where models trained on focal recordings are evaluated on soundscapes exposes a large "
        "covariate shift.",
        extra="audio",
    ),
    System(
        "hgm",
        "Generalizable Human Gaussians from Single-View Image",
        "Jinnan Chen, Chen Li, Jianfeng Zhang, Lingting Zhu, Buzhen Huang, Hanlin Chen, Gim Hee Lee",
        "2406.06050",
        "A body-prior-guided Gaussian model reconstructs a human from one image better than image-only models.",
        extra="human",
    ),
    System(
        "budgeted_cl",
        "Budgeted Online Continual Learning by Adaptive Layer Freezing and Frequency-based Sampling",
        "Minhyuk Seo, Hyunseo Koh, Jonghyun Choi",
        "2410.15143",
        "Adaptive layer freezing and frequency-based retrieval beat other online CL methods at equal FLOPs and "
        "memory budgets.",
        real_preset=True,
    ),
    System(
        "certainty_calibration",
        "Calibrating Expressions of Certainty",
        "Peiqi Wang, Barbara D. Lam, Yingcheng Liu, Ameneh Asgari-Targhi, Rameswar Panda, William M. Wells, "
        "Tina Kapur, Polina Golland",
        "2410.04315",
        "Treating certainty phrases as distributions enables a calibration error for them and an optimal-transport "
        "recalibration map from phrases to phrases.",
        extra="stats",
        numpy_only=True,
    ),
    System(
        "mofflow",
        "MOFFlow: Flow Matching for Structure Prediction of Metal-Organic Frameworks",
        "Nayoung Kim, Seongsu Kim, Minsu Kim, Jinkyoo Park, Sungsoo Ahn",
        "2410.17270",
        "Flow matching over rigid building blocks on SE(3) predicts MOF structures more accurately and faster "
        "than atom-level methods.",
        extra="chem",
        real_preset=True,
    ),
)

_BY_SLUG = {s.slug: s for s in SYSTEMS}
SLUGS: tuple[str, ...] = tuple(_BY_SLUG)


def get(slug: str) -> System:
    """The system registered under ``slug``; ``KeyError`` listing the valid slugs otherwise."""
    try:
        return _BY_SLUG[slug]
    except KeyError:
        raise KeyError(f"unknown system {slug!r}; valid slugs: {', '.join(SLUGS)}") from None


@contextlib.contextmanager
def temporarily(*systems: System) -> Iterator[None]:
    """Register extra systems (a plugin's, or a test's fake experiment) for the duration of a ``with`` block."""
    global SYSTEMS, SLUGS, _BY_SLUG
    saved = SYSTEMS, SLUGS, _BY_SLUG
    SYSTEMS = saved[0] + tuple(systems)
    _BY_SLUG = {s.slug: s for s in SYSTEMS}
    SLUGS = tuple(_BY_SLUG)
    try:
        yield
    finally:
        SYSTEMS, SLUGS, _BY_SLUG = saved


def find(slug: str) -> System | None:
    """The system registered under ``slug``, or ``None``."""
    return _BY_SLUG.get(slug)


def suggest(name: str, choices: list[str] | tuple[str, ...] | None = None) -> str:
    """`` (did you mean 'x'?)`` for a near miss among ``choices`` (default: every slug), else ``""``."""
    import difflib

    pool = list(SLUGS if choices is None else choices)
    near = difflib.get_close_matches(str(name).lower(), pool, n=2, cutoff=0.6)
    if not near:
        near = [s for s in pool if str(name) and (str(name).lower() in s or s in str(name).lower())][:2]
    return f" (did you mean {' or '.join(repr(n) for n in near)}?)" if near else ""


def runnable(slug: str) -> System:
    """The system ``slug``; ``UsageError`` (a ``ValueError``) naming the runnable ones, with a "did you mean"
    for a misspelling, otherwise."""
    names = list(SLUGS)
    if slug not in _BY_SLUG:
        raise UsageError(
            f"unknown system {slug!r}{suggest(slug, names)}; runnable: all, {', '.join(names) or '(none)'}"
        )
    return _BY_SLUG[slug]
