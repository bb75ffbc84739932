"""Toolkits: APIs clustered by the embedding of their functionality text (Tool-Planner §3.1).

``e(a) = Embed(f(a))`` for every API a, then k-means++ on {e(a)} gives toolkits T_1 … T_k; each toolkit gets a
description d_j (an LLM summary in the paper; the concatenated functionality texts offline) and a centroid used
by similarity-based planners. The paper embeds with SimCSE; offline the default is scikit-learn TF-IDF, and users
with local weights can pass :class:`SentenceTransformerEmbedder` or :class:`HFPoolingEmbedder`.
"""

from __future__ import annotations

import warnings
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from .schemas import Tool


class Embedder(Protocol):
    """Maps texts to L2-normalised row vectors. ``fit`` sees the tool library's functionality texts once."""

    def fit(self, texts: Sequence[str]) -> Embedder: ...

    def encode(self, texts: Sequence[str]) -> np.ndarray: ...


def _normalise(x: np.ndarray) -> np.ndarray:
    n = np.linalg.norm(x, axis=1, keepdims=True)
    return x / np.where(n > 0, n, 1.0)


class TfidfEmbedder:
    """scikit-learn TF-IDF (sublinear tf, English stop words), optionally reduced by TruncatedSVD."""

    def __init__(self, n_components: int | None = None, seed: int = 0):
        if n_components is not None and (not isinstance(n_components, int) or n_components < 1):
            raise ValueError(f"n_components must be None or an int >= 1, got {n_components!r}")
        self.n_components = n_components
        self.seed = seed

    def fit(self, texts: Sequence[str]) -> TfidfEmbedder:
        from sklearn.feature_extraction.text import TfidfVectorizer

        self.vectorizer_ = TfidfVectorizer(sublinear_tf=True, stop_words="english")
        x = self.vectorizer_.fit_transform(list(texts))
        self.svd_ = None
        if self.n_components is not None and self.n_components < x.shape[1]:
            from sklearn.decomposition import TruncatedSVD

            self.svd_ = TruncatedSVD(self.n_components, random_state=self.seed).fit(x)
        return self

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        if not hasattr(self, "vectorizer_"):
            raise RuntimeError("TfidfEmbedder is not fitted: call fit(texts) first")
        x = self.vectorizer_.transform(list(texts))
        x = self.svd_.transform(x) if self.svd_ is not None else x.toarray()
        return _normalise(np.asarray(x, dtype=np.float64))


class SentenceTransformerEmbedder:
    """A local sentence-transformers model (e.g. a SimCSE checkpoint on disk); nothing is downloaded."""

    def __init__(self, model_path: str, device: str = "cpu", batch_size: int = 64):
        try:
            from sentence_transformers import SentenceTransformer
        except ImportError:
            raise ImportError(
                "SentenceTransformerEmbedder needs `pip install sentence-transformers`; the default TfidfEmbedder "
                "needs nothing"
            ) from None
        self.model = SentenceTransformer(model_path, device=device, local_files_only=True)
        self.batch_size = batch_size

    def fit(self, texts: Sequence[str]) -> SentenceTransformerEmbedder:
        return self

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        x = self.model.encode(list(texts), batch_size=self.batch_size, convert_to_numpy=True)
        return _normalise(np.asarray(x, dtype=np.float64))


class HFPoolingEmbedder:
    """A local Hugging Face encoder: ``pooling="pooler"`` takes ``pooler_output`` (what the official code does
    with SimCSE), ``"cls"`` the first token, ``"mean"`` the masked mean of the last hidden state."""

    def __init__(self, model_path: str, pooling: str = "pooler", device: str = "cpu", batch_size: int = 32):
        if pooling not in ("pooler", "cls", "mean"):
            raise ValueError(f"pooling must be 'pooler', 'cls' or 'mean', got {pooling!r}")
        from transformers import AutoModel, AutoTokenizer

        self.tok = AutoTokenizer.from_pretrained(model_path, local_files_only=True)
        self.model = AutoModel.from_pretrained(model_path, local_files_only=True).to(device).eval()
        self.pooling, self.device, self.batch_size = pooling, device, batch_size

    def fit(self, texts: Sequence[str]) -> HFPoolingEmbedder:
        return self

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        import torch

        outs = []
        with torch.no_grad():
            for i in range(0, len(texts), self.batch_size):
                b = self.tok(
                    list(texts[i : i + self.batch_size]), padding=True, truncation=True, return_tensors="pt"
                )
                b = {k: v.to(self.device) for k, v in b.items()}
                o = self.model(**b)
                if self.pooling == "pooler":
                    if getattr(o, "pooler_output", None) is None:
                        raise ValueError(
                            f"{type(self.model).__name__} has no pooler_output; use pooling='mean'"
                        )
                    v = o.pooler_output
                elif self.pooling == "cls":
                    v = o.last_hidden_state[:, 0]
                else:
                    m = b["attention_mask"].unsqueeze(-1).to(o.last_hidden_state.dtype)
                    v = (o.last_hidden_state * m).sum(1) / m.sum(1).clamp_min(1)
                outs.append(v.float().cpu().numpy())
        return _normalise(np.concatenate(outs).astype(np.float64))


@dataclass
class Toolkit:
    """One cluster T_j: its APIs, description d_j and the (normalised) mean embedding of its members."""

    id: int
    tools: list[Tool]
    description: str
    centroid: np.ndarray = field(repr=False)

    @property
    def names(self) -> list[str]:
        return [t.name for t in self.tools]


class ToolIndex:
    """The tool library embedded once: ``e(a)`` for every API (rows in ``tools`` order) and similarity search."""

    def __init__(
        self,
        tools: Sequence[Tool],
        embedder: Embedder | None = None,
        text: Callable[[Tool], str] | None = None,
    ):
        tools = list(tools)
        if not tools:
            raise ValueError("tools must be a non-empty sequence of Tool")
        if not all(isinstance(t, Tool) for t in tools):
            raise ValueError("tools must contain Tool objects (use Tool.from_openai for OpenAI schema dicts)")
        dup = [n for n, c in Counter(t.name for t in tools).items() if c > 1]
        if dup:
            raise ValueError(f"tool names must be unique, duplicated: {dup[:5]}")
        self.tools = tools
        self.text = text or functionality_text
        self.texts = [self.text(t) for t in tools]
        self.embedder = embedder if embedder is not None else TfidfEmbedder()
        emb = np.asarray(self.embedder.fit(self.texts).encode(self.texts), dtype=np.float64)
        if emb.ndim != 2 or emb.shape[0] != len(tools) or not np.isfinite(emb).all():
            raise ValueError("embedder returned a wrong-shaped or non-finite embedding matrix")
        self.embeddings = emb  # (N, d)
        self.pos = {t.name: i for i, t in enumerate(tools)}
        self._cache: dict[
            str, np.ndarray
        ] = {}  # query text → embedding (planners ask for the same goals often)

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        texts = list(texts)
        todo = [t for t in dict.fromkeys(texts) if t not in self._cache]
        if todo:
            for t, v in zip(todo, np.asarray(self.embedder.encode(todo), dtype=np.float64)):
                if len(self._cache) < 100_000:
                    self._cache[t] = v
                else:
                    return np.asarray(self.embedder.encode(texts), dtype=np.float64)
        return np.stack([self._cache[t] for t in texts])

    def rank(self, query: str, tools: Sequence[Tool] | None = None) -> list[Tool]:
        """``tools`` (default: all) by cosine similarity to ``query``, most similar first (stable on ties)."""
        tools = self.tools if tools is None else list(tools)
        if not tools:
            return []
        q = self.encode([query])[0]
        sims = self.embeddings[[self.pos[t.name] for t in tools]] @ q
        return [tools[i] for i in np.argsort(-sims, kind="stable")]


@dataclass
class ToolkitSet:
    """The k toolkits over a tool library, with the :class:`ToolIndex` that built them."""

    toolkits: list[Toolkit]
    index: ToolIndex = field(repr=False)

    def __len__(self) -> int:
        return len(self.toolkits)

    def __getitem__(self, j: int) -> Toolkit:
        return self.toolkits[j]

    @property
    def tools(self) -> list[Tool]:
        return self.index.tools

    @property
    def assignment(self) -> dict[str, int]:
        """API name → toolkit id."""
        return {t.name: tk.id for tk in self.toolkits for t in tk.tools}

    def purity(self, labels: dict[str, str]) -> float:
        """Cluster purity against true labels (API name → functionality class): Σ_j max_c |T_j ∩ c| / N."""
        n = sum(len(tk.tools) for tk in self.toolkits)
        hits = sum(Counter(labels[t.name] for t in tk.tools).most_common(1)[0][1] for tk in self.toolkits)
        return hits / n

    def rank_toolkits(self, query: str, exclude: set[int] | frozenset[int] = frozenset()) -> list[int]:
        """Toolkit ids by cosine similarity of their centroid to ``query``, most similar first."""
        q = self.index.encode([query])[0]
        sims = np.stack([tk.centroid for tk in self.toolkits]) @ q
        return [int(j) for j in np.argsort(-sims, kind="stable") if int(j) not in exclude]


def functionality_text(tool: Tool) -> str:
    """f(a): the text that is embedded. Tool-Planner asks an LLM for one sentence per API; offline the API's
    own description (with its name's words) stands in for it."""
    return f"{tool.name.replace('_', ' ')}. {tool.description}"


KMEANS_IMPLS = ("numpy", "sklearn")


def _sqdist(x: np.ndarray, c: np.ndarray, decimals: int) -> np.ndarray:
    """Squared Euclidean distances (n, m), clipped at 0 and rounded to ``10**-decimals``: last-bit differences
    between BLAS kernels / thread splits (≈1e-16) then give the same numbers, and exact ties go to the lowest
    index in every ``argmin``."""
    d = (x * x).sum(1)[:, None] + (c * c).sum(1)[None, :] - 2.0 * (x @ c.T)
    return np.round(np.maximum(d, 0.0), decimals)


def kmeans_labels(x: np.ndarray, k: int, seed: int = 0, max_iter: int = 300, decimals: int = 9) -> np.ndarray:
    """k-means++ seeding (greedy variant with ``2 + ⌊ln k⌋`` local trials, as scikit-learn's) followed by Lloyd
    iterations until the assignment stops changing, on distances rounded to ``10**-decimals``.

    Same algorithm as ``KMeans(init="k-means++", n_init=1)``, written so that the labels depend only on
    ``(x, k, seed)``: scikit-learn's version sums centres over OpenMP chunks and computes distances with BLAS, so
    its labels move with the CPU and the thread count when points are near-tied (a 1e-15 relative perturbation of
    the TF-IDF embeddings changes the quick preset's pass rates by up to 2 points)."""
    x = np.asarray(x, dtype=np.float64)
    n = len(x)
    if not 1 <= k <= n:
        raise ValueError(f"k must be in [1, {n}], got {k!r}")
    rng = np.random.default_rng(int(seed))
    trials = 2 + int(np.log(k))
    centers = [int(rng.integers(n))]
    closest = _sqdist(x, x[centers], decimals)[:, 0]  # (n,)
    for _ in range(1, k):
        pot = float(closest.sum())
        if pot <= 0:  # fewer distinct points than k: the next centre is any not yet chosen point
            rest = [i for i in range(n) if i not in set(centers)]
            centers.append(rest[0])
            continue
        cand = np.searchsorted(np.cumsum(closest), rng.random(trials) * pot, side="right")
        cand = np.minimum(cand, n - 1)
        d = np.minimum(closest[None, :], _sqdist(x[cand], x, decimals))  # (trials, n)
        best = int(np.argmin(np.round(d.sum(1), decimals)))
        centers.append(int(cand[best]))
        closest = d[best]
    c = x[centers].copy()  # (k, d)
    labels = np.argmin(_sqdist(x, c, decimals), axis=1)
    for _ in range(max_iter):
        for j in range(k):
            m = labels == j
            if m.any():  # an empty cluster keeps its centre
                c[j] = x[m].mean(0)
        new = np.argmin(_sqdist(x, c, decimals), axis=1)
        if np.array_equal(new, labels):
            break
        labels = new
    return labels


def build_toolkits(
    tools: Sequence[Tool] | ToolIndex,
    k: int,
    embedder: Embedder | None = None,
    seed: int = 0,
    describe: Callable[[list[Tool]], str] | None = None,
    kmeans: str = "numpy",
) -> ToolkitSet:
    """Cluster ``tools`` into ``k`` toolkits by k-means++ then Lloyd on the embeddings of their functionality
    texts. ``kmeans="numpy"`` (default) is :func:`kmeans_labels`, reproducible across machines and thread counts;
    ``kmeans="sklearn"`` is the official code's ``KMeans(n_clusters=k, init="k-means++", n_init=1,
    random_state=seed)`` (its labels can differ between machines on near-ties). APIs with identical text always
    share a toolkit (identical points get the same nearest centre). When the library has fewer distinct texts
    than ``k``, empty clusters are dropped with a warning. ``describe`` turns a toolkit's APIs into its
    description d_j (e.g. an LLM summary); default: their functionality texts joined. Pass a prebuilt
    :class:`ToolIndex` to cluster the same embeddings at several k."""
    if kmeans not in KMEANS_IMPLS:
        raise ValueError(f"kmeans must be one of {KMEANS_IMPLS}, got {kmeans!r}")
    index = tools if isinstance(tools, ToolIndex) else ToolIndex(tools, embedder)
    n = len(index.tools)
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or not 1 <= k <= n:
        raise ValueError(f"k must be an int in [1, number of tools = {n}], got {k!r}")
    k = int(k)
    emb = index.embeddings
    if k == 1:
        labels = np.zeros(n, dtype=int)
    elif kmeans == "numpy":
        labels = kmeans_labels(emb, k, seed=seed)
    else:
        from sklearn.cluster import KMeans

        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="Number of distinct clusters")
            labels = KMeans(n_clusters=k, init="k-means++", n_init=1, random_state=seed).fit_predict(emb)
    used = sorted(set(labels.tolist()))
    if len(used) < k:
        warnings.warn(
            f"build_toolkits: only {len(used)} non-empty toolkits of k={k} (fewer distinct texts)",
            stacklevel=2,
        )
    return toolkits_from_labels(index, labels, describe=describe)


def toolkits_from_labels(
    index: ToolIndex,
    labels: Sequence[int] | np.ndarray,
    descriptions: Mapping[int, str] | None = None,
    describe: Callable[[list[Tool]], str] | None = None,
) -> ToolkitSet:
    """Toolkits from a given assignment (``labels[i]`` is the toolkit of ``index.tools[i]``, e.g. stored in a
    toolkit library file). Non-empty labels are renumbered 0, 1, … in ascending order; a toolkit's description
    is ``descriptions[label]`` when given and non-empty, else ``describe(members)``, else its members'
    functionality texts joined. Centroids are the normalised mean member embeddings."""
    labels = np.asarray(labels)
    n = len(index.tools)
    if labels.shape != (n,) or not np.issubdtype(labels.dtype, np.integer) or (labels < 0).any():
        raise ValueError(
            f"labels must be {n} non-negative ints (one per tool of the index), got shape {labels.shape} "
            f"dtype {labels.dtype}"
        )
    emb = index.embeddings
    toolkits = []
    for new_id, j in enumerate(sorted(set(labels.tolist()))):
        idx = np.flatnonzero(labels == j)
        members = [index.tools[i] for i in idx]
        c = emb[idx].mean(0)
        c = c / (np.linalg.norm(c) or 1.0)
        d = (descriptions or {}).get(j) or ""
        if not d:
            d = describe(members) if describe is not None else " ".join(index.texts[i] for i in idx)
        toolkits.append(Toolkit(id=new_id, tools=members, description=d, centroid=c))
    return ToolkitSet(toolkits=toolkits, index=index)
