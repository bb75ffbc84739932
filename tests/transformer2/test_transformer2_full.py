"""The ``full`` preset on local miniatures: parquet files with GSM8K's, MBPP's and ARC's columns read through the
same loader a hub run uses; nothing is downloaded."""

from __future__ import annotations

import dataclasses

import pytest

from iclr25.transformer2 import full as F
from iclr25.transformer2.experiment import PRESETS, FullConfig


def _tables(tmp_path):
    import datasets

    gsm = {
        "question": [f"Tom has {i} apples and buys 2. How many?" for i in range(12)],
        "answer": [f"{i} + 2 = {i + 2}\n#### {i + 2:,}" for i in range(1000, 1012)],
    }
    mbpp = {
        "task_id": list(range(11, 23)),
        "text": [f"Write a function f{i} returning {i}." for i in range(12)],
        "code": [f"def f{i}():\n    return {i}" for i in range(12)],
        "test_list": [[f"assert f{i}() == {i}"] for i in range(12)],
    }
    arc = {
        "id": [f"q{i}" for i in range(12)],
        "question": [f"Which is number {i % 4}?" for i in range(12)],
        "choices": [
            {
                "text": ["zero", "one", "two", "three"],
                "label": ["A", "B", "C", "D"] if i % 2 else ["1", "2", "3", "4"],
            }
            for i in range(12)
        ],
        "answerKey": [("ABCD"[i % 4] if i % 2 else str(i % 4 + 1)) for i in range(12)],
    }
    files = []
    for name, cols in (("gsm8k", gsm), ("mbpp", mbpp), ("arc", arc), ("arc-challenge", arc)):
        path = tmp_path / f"{name}.parquet"
        datasets.Dataset.from_dict(cols).to_parquet(str(path))
        files.append(f"{name}={path}")
    return tuple(files)


def test_full_preset_names_the_papers_model_and_data():
    cfg = PRESETS["full"]
    assert isinstance(cfg, FullConfig)
    assert cfg.model == "meta-llama/Meta-Llama-3-8B-Instruct" and cfg.device == "cuda"
    assert cfg.train_datasets == ("gsm8k", "mbpp", "arc") and cfg.heldout_dataset == "arc-challenge"
    shown = dataclasses.asdict(cfg)["downloads"]  # what `iclr25 config transformer2 --preset full` prints
    for name in (
        "Meta-Llama-3-8B-Instruct",
        "openai/gsm8k",
        "google-research-datasets/mbpp",
        "allenai/ai2_arc",
    ):
        assert any(name in line and ("GB" in line or "MB" in line) for line in shown), name


def test_miniature_tables_through_the_loader(tmp_path):
    files = _tables(tmp_path)
    gsm = F.build_full_task("gsm8k", 0, 3, 2, files)
    assert (len(gsm.test), len(gsm.val), len(gsm.train)) == (3, 2, 7)
    keys = [{it.key for it in s} for s in (gsm.train, gsm.val, gsm.test)]
    assert not (keys[0] & keys[1]) and not (keys[0] & keys[2]) and not (keys[1] & keys[2])
    assert {it.answer for it in gsm.train + gsm.val + gsm.test} == {f" {i + 2}" for i in range(1000, 1012)}
    arc = F.build_full_task("arc", 0, 3, 2, files)
    for it in arc.train + arc.val + arc.test:
        assert arc.labels[it.label] == it.answer and it.prompt.endswith("D. three\nAnswer:")
    mb = F.build_full_task("mbpp", 1, 3, 2, files)
    assert all(it.prompt.endswith("```python\n") and it.answer.startswith("def f") for it in mb.test)
    with pytest.raises(ValueError, match="NAME=PATH"):
        F.load_task_table("gsm8k", ("gsm8k:" + str(tmp_path),))
    with pytest.raises(ValueError, match="lacks columns"):
        F.load_task_table("arc", (files[0].replace("gsm8k=", "arc="),))
    with pytest.raises(ValueError, match="#### <number>"):
        F.gsm8k_final("no final line")
