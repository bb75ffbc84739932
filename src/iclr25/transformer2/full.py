"""The ``full`` preset's inputs: the paper's model and training tasks by name (§4.1: Llama-3-8B-Instruct; SVF experts
on GSM8K, MBPP and ARC-Easy; ARC-Challenge among the unseen tasks), read through ``datasets`` from the hub — or from
local parquet files with the same columns (``data_files``), which is how the tests build miniatures. Each table
becomes the real preset's :class:`~iclr25.transformer2.tasks.Item` list, split per seed as there.

What would be downloaded and its size is the config's ``downloads`` field (``iclr25 config transformer2 --preset
full``); nothing is downloaded unless a full run asks for it.
"""

from __future__ import annotations

import re
from typing import Any

from .tasks import Item, TaskData, _cut, _rng

HUB_MODEL = "meta-llama/Meta-Llama-3-8B-Instruct"
# name -> (hub dataset, config, split read)
DATASETS = {
    "gsm8k": ("openai/gsm8k", "main", "train"),
    "mbpp": ("google-research-datasets/mbpp", "full", "train"),
    "arc": ("allenai/ai2_arc", "ARC-Easy", "train"),
    "arc-challenge": ("allenai/ai2_arc", "ARC-Challenge", "test"),
}
COLUMNS = {
    "gsm8k": ("question", "answer"),
    "mbpp": ("task_id", "text", "code", "test_list"),
    "arc": ("id", "question", "choices", "answerKey"),
    "arc-challenge": ("id", "question", "choices", "answerKey"),
}
# sizes as listed on the hub (parquet / safetensors files of the named config and split), approximate
DOWNLOADS = (
    f"model {HUB_MODEL}: 16.1 GB (bf16 safetensors, 4 shards; gated, Meta Llama 3 Community License)",
    "dataset openai/gsm8k main train: 2.3 MB parquet (7,473 problems; MIT)",
    "dataset google-research-datasets/mbpp full train: 0.2 MB parquet (374 problems; CC BY 4.0)",
    "dataset allenai/ai2_arc ARC-Easy train: 0.3 MB parquet (2,251 questions; CC BY-SA 4.0)",
    "dataset allenai/ai2_arc ARC-Challenge test: 0.2 MB parquet (1,172 questions; CC BY-SA 4.0)",
)
ARC_LETTERS = ("A", "B", "C", "D", "E")
DISPATCH_LABELS = {"gsm8k": " math", "mbpp": " code", "arc": " reasoning"}


def _files(data_files: tuple[str, ...]) -> dict[str, str]:
    out = {}
    for spec in data_files:
        name, sep, path = spec.partition("=")
        if not sep or name not in DATASETS or not path:
            raise ValueError(
                f"data_files entries must be NAME=PATH with NAME in {sorted(DATASETS)}, got {spec!r}"
            )
        out[name] = path
    return out


def load_task_table(name: str, data_files: tuple[str, ...] = ()) -> Any:
    """The ``datasets.Dataset`` of task ``name``: a local parquet file when ``data_files`` names one
    (``"gsm8k=/path/train.parquet"``), else the hub dataset of :data:`DATASETS`. Its columns are checked."""
    import datasets

    if name not in DATASETS:
        raise ValueError(f"name must be one of {sorted(DATASETS)}, got {name!r}")
    local = _files(data_files).get(name)
    if local is not None:
        ds = datasets.load_dataset("parquet", data_files={"train": local}, split="train")
    else:
        path, config, split = DATASETS[name]
        ds = datasets.load_dataset(path, config, split=split)
    missing = [c for c in COLUMNS[name] if c not in ds.column_names]
    if missing:
        raise ValueError(f"{name}: the table lacks columns {missing} (has {ds.column_names})")
    return ds


def gsm8k_final(answer: str) -> str:
    """GSM8K's final answer: the number after ``####`` (thousands separators removed)."""
    m = re.search(r"####\s*(.+)\s*$", answer)
    if m is None:
        raise ValueError(f"a GSM8K answer must end with '#### <number>', got {answer[-40:]!r}")
    return m.group(1).replace(",", "").strip()


def gsm8k_items(ds) -> list[Item]:
    return [
        Item(
            f"Question: {r['question']}\nGive the final number only.\nAnswer:",
            f" {gsm8k_final(r['answer'])}",
            f"gsm8k:{i}",
        )
        for i, r in enumerate(ds)
    ]


def mbpp_items(ds) -> list[Item]:
    """MBPP: the answer is the reference program; the reward is its tests (``test_list``), kept in ``key``'s row."""
    return [
        Item(
            f"{r['text']}\nYour code should pass this test:\n{r['test_list'][0]}\n```python\n",
            r["code"],
            f"mbpp:{r['task_id']}",
        )
        for r in ds
    ]


def arc_items(ds, name: str = "arc") -> list[Item]:
    """ARC: question and lettered choices; the label word is the answer's letter (numeric keys 1–5 → A–E)."""
    items = []
    for r in ds:
        labels = [ARC_LETTERS[int(x) - 1] if x.isdigit() else x for x in r["choices"]["label"]]
        key = ARC_LETTERS[int(r["answerKey"]) - 1] if r["answerKey"].isdigit() else r["answerKey"]
        lines = "\n".join(f"{lab}. {t}" for lab, t in zip(labels, r["choices"]["text"]))
        items.append(
            Item(f"{r['question']}\n{lines}\nAnswer:", f" {key}", f"{name}:{r['id']}", ARC_LETTERS.index(key))
        )
    return items


def build_full_task(
    name: str, seed: int, n_test: int, n_val: int, data_files: tuple[str, ...] = ()
) -> TaskData:
    """One task's items shuffled by the seed and cut into test / val / train (disjoint)."""
    ds = load_task_table(name, data_files)
    if name == "gsm8k":
        items, kind, labels = gsm8k_items(ds), "generate", ()
    elif name == "mbpp":
        items, kind, labels = mbpp_items(ds), "generate", ()
    else:
        items, kind, labels = arc_items(ds, name), "label", tuple(f" {x}" for x in ARC_LETTERS)
    order = [items[i] for i in _rng(seed, "full", name).permutation(len(items))]
    te, va, tr = _cut(len(order), n_test, n_val)
    counts = {"rows": len(items), "test": n_test, "val": n_val, "train": len(order[tr])}
    return TaskData(name, kind, labels, order[tr], order[va], order[te], counts)


def run(cfg, out) -> Any:
    """Not implemented yet: the config, the downloads and the task tables are in place; the run needs MBPP's
    test-execution reward and generated-program scoring."""
    from iclr25.errors import UsageError

    raise UsageError(
        "transformer2: the full preset names its model and data (config field downloads) and its task tables load "
        "(full.load_task_table); its run is not implemented yet: MBPP needs a test-execution reward and "
        "generated-program scoring"
    )
