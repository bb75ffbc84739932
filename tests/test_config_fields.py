"""Experiment configs declare their per-field bounds with ``iclr25.common.fields.bounded`` (issue #39): a bad value
for a declared field (0, -1, NaN, inf, a bool for an int, a float for an int, an unknown choice) is refused with a
``ValueError`` that names the field, the value and what was expected, before any rule across fields runs."""

from __future__ import annotations

import dataclasses
import importlib
import math
import re

import pytest

from iclr25.common.fields import Check

CASES = {
    "pds": [("n_pool", 0), ("proxy_heads", True), ("warm_steps", -1), ("ratio", math.nan), ("tau", -0.5),
            ("train_lr", 0.0), ("scorer", "bert"), ("dsir_backend", "torch"),
            ("mix", (0.5, 0.5, -0.2, 0.2)), ("mix", (0.5, 0.5))],
    "topic_unlearning": [("m", 0), ("n_topics", True), ("delta", 1.0), ("epsilon", 0.0), ("anchor_mass", math.nan),
                         ("newton_grid", (1, 0, 100)), ("head_grid", ())],
    "transformer2": [("lora_steps", 0), ("hidden", True), ("pretrain_steps", -1), ("shift_hi", 10),
                     ("lora_lr", math.nan), ("cls_steps", 0), ("svf_mode", "lora"),
                     ("lora_tasks", ("A", "Z")), ("shift_tasks", ())],
    "quantum_peft": [("depth", 0), ("lora_rank", True), ("pretrain_epochs", -1), ("patch", 3), ("source_frac", 1.0),
                     ("lr_angles", -1.0), ("lora_alpha", math.inf),
                     ("widths", (64, 4)), ("scaling_qubits", (10, 0))],
    "law": [("train_steps", 0), ("heads", True), ("generic_rows", -1), ("fact_rows", 0), ("wash_fraction", 0.6),
            ("known_threshold", math.nan), ("ascent_lr", math.inf), ("beta_ratio", 0.5),
            ("edit_layers", (0, -1)), ("ft_lrs", (1e-3, math.inf))],
    "cascading_kv": [("cache_size", 0), ("cascades", True), ("sink_tokens", -1), ("beta", 1.0), ("beta", math.nan),
                     ("mode", "chat"), ("train_lengths", (32, 4)), ("distance_factors", (0.625, math.nan))],
    "budgeted_cl": [("n_train", -1), ("batch_size", 0), ("extra_bytes", True), ("image_size", 16.0),
                    ("streams", ()), ("arms", ("er", "lwf"))],
    "certainty_calibration": [("n_items", 99), ("bins", 0), ("bins", True), ("alt_splits", -1),
                              ("bins_sweep", (10, 0)), ("bins_sweep", ())],
    "mofflow": [("n_train", 0), ("n_euler", 1), ("batch_size", 10**8), ("atom_batch_size", True), ("lr", math.nan),
                ("steps_per_size", (520, 0, 240)), ("atom_steps_per_size", (360, True, 23))],
    "dst_robustness": [("noise_shot", (1.0, 0.0)), ("methods", ()), ("n_test", 5), ("ra_points", 1), ("ra_max_radius", 0.0),
                       ("arch", "vgg16"), ("widths", (4, 0, 8)), ("sparsities", (0.5, 1.0))],
    "ohio": [("horizon", 0), ("k", True), ("n_noisy", -1), ("prior", math.nan), ("adam_lr", 0.0),
             ("hr_velocity_gain", math.inf), ("solver", "sgd")],
    "freevs": [("train_steps", 0), ("batch", True), ("curve_points", -1), ("mismatch_ratio", math.nan),
               ("lr", 0.0), ("hfov_deg", math.inf), ("width", 1), ("occupancy", "square"),
               ("test_starts", (4, -1)), ("offsets", (0.0, 2.0, math.nan))],
    "hgm": [("steps", 0), ("batch_size", True), ("body_refine_steps", -1), ("budget_s", math.inf),
            ("body_refine_threshold", math.nan), ("sup_views", 13), ("lr", 0.0), ("num_points", 0),
            ("pose_noise_deg", -1.0)],
    "scope_faithfulness": [("n_data", 3), ("hidden", 0), ("layers", True), ("n_untouched", -1), ("alpha", math.nan),
                           ("top_p", 1.5), ("tune_lr", math.inf), ("arch", "bert"),
                           ("alphas", ()), ("alphas", (0.1, 0.0))],
    "tool_planner": [("n_tasks", 0), ("max_api_calls", True), ("n_bfcl_tasks", -1), ("llm_timeout", 0.0),
                     ("llm_timeout", math.inf), ("min_steps", 0), ("policy", "gpt"), ("goal_bank", "docs"),
                     ("react_grid", (1, -2)), ("replan_grid", ())],
    "pfes_gim": [("n_frames", 249), ("a_epochs", 0), ("channels", True), ("b_seeds", -1), ("a_itr", 4),
                 ("loso_epochs", -1), ("dropout", 1.0), ("dataset", "CASME3"),
                 ("thr_grid", ()), ("iac_grid", (0.0, -0.1))],
    "birdset": [("n_species", 1), ("event_limit", 0), ("class_limit", True), ("max_phrases", -1),
                ("focal_log_sd", math.nan), ("valid_frac", 1.0), ("soundscape_s", math.inf), ("model", "resnet"),
                ("focal_duration", (3.0, 10.0)), ("arms", ("A", "B", "D"))],
    "improver": [("n_theorems", 0), ("lm_steps", True), ("train_variants", -1), ("p_have", math.nan), ("lm_lr", 0.0),
                 ("temperature", math.inf), ("backend", "coq"), ("lean_file", None)],
    "fosp": [("wm_updates", 0), ("eval_episodes", True), ("max_steps", -1), ("noref_adv_temperature", math.nan),
             ("noref_qc_tolerance", math.inf), ("official_arm", 1)],
}  # fmt: skip
PARAMS = [(slug, name, value) for slug, cases in CASES.items() for name, value in cases]
# library configs that call check_fields(self) themselves: (module, class, field, bad value)
LIB_CASES = [
    ("fosp.agent", "FOSPConfig", "seq_len", 1),
    ("fosp.agent", "FOSPConfig", "tau_r", 1.0),
    ("fosp.agent", "FOSPConfig", "actor_update", "sgd"),
    ("fosp.agent", "FOSPConfig", "online_frac", math.nan),
    ("quantum_peft.model", "QuantumPEFTConfig", "rank", 0),
    ("quantum_peft.model", "QuantumPEFTConfig", "dropout", 1.0),
    ("quantum_peft.model", "QuantumPEFTConfig", "angle_bits", 17),
    ("dst_robustness.sparsity", "DSTConfig", "sparsity", math.nan),
    ("dst_robustness.sparsity", "DSTConfig", "regrow", "best"),
    ("dst_robustness.training", "ClassifierTrainConfig", "momentum", 1.0),
    ("ohio.learners", "IQLConfig", "steps", -1),
    ("ohio.learners", "IQLConfig", "expectile", 1.0),
    ("ohio.arm", "ArmParams", "dt", 0.0),
    ("ohio.network", "NetworkParams", "n_nodes", 5),
    ("transformer2.reinforce", "ReinforceConfig", "kl_direction", "forward"),
    ("transformer2.reinforce", "ReinforceConfig", "max_new_tokens", True),
    ("transformer2.reinforce", "ReinforceConfig", "kl_coef", math.nan),
    ("transformer2.reinforce", "ReinforceConfig", "max_grad_norm", 0.0),
    ("law.memit", "ZConfig", "clamp", math.inf),
    ("law.memit", "LamSearch", "decay", 1.0),
    ("law.world", "WorldConfig", "relation_first", 1),
    ("mofflow.network", "MOFFlowConfig", "radius", 0.0),
    ("mofflow.atom_flow", "AtomFlowConfig", "layers", 0),
    ("mofflow.atom_flow", "AtomFlowConfig", "rbf_max", math.inf),
    ("mofflow.toymof", "ToyMOFConfig", "angle_low", 80.0),
    ("mofflow.training", "FlowTrainConfig", "self_condition", 1.5),
    ("mofflow.toymof", "ToyMOFConfig", "sizes", (4, 32)),
    ("budgeted_cl.runner", "MethodConfig", "fisher", "exact"),
    ("budgeted_cl.runner", "MethodConfig", "grad_subsample", 0.0),
    ("freevs.model", "EDMConfig", "sigma_min", 0.0),
    ("freevs.model", "EDMConfig", "drop_prob", 1.0),
    ("freevs.world", "Camera", "width", True),
    ("freevs.world", "Camera", "hfov_deg", math.nan),
    ("hgm.model", "HGMConfig", "heads", 0),
    ("hgm.model", "HGMConfig", "use_body", 1),
    ("hgm.model", "HGMConfig", "max_offset", math.inf),
    ("hgm.model", "HGMConfig", "channels", (8, True, 16)),
    ("hgm.model", "HGMConfig", "channels", (16, 32)),
    ("hgm.model", "HGMConfig", "image_size", 32.0),
    ("scope_faithfulness.biographies", "World", "n_jobs", 1),
    ("scope_faithfulness.biographies", "World", "prior_seed", True),
    ("tool_planner.planner", "Budget", "max_reasks", -1),
    ("tool_planner.planner", "Budget", "max_llm_calls", 0),
    ("common.train", "LMTrainConfig", "lr", math.inf),
    ("common.train", "LMTrainConfig", "beta2", 1.0),
    ("common.train", "LMTrainConfig", "steps", 2.0),
    ("pfes_gim.training", "SpottingTrainConfig", "gamma", 0.0),
    ("pfes_gim.training", "SpottingTrainConfig", "frame_rate", math.nan),
    ("pfes_gim.losses", "LossConfig", "smooth", "signed_abs"),
    ("pfes_gim.pseudo_labels", "GIMConfig", "gim_start", 0),
    ("pfes_gim.pseudo_labels", "GIMConfig", "k", (32, 3)),
    ("pfes_gim.pseudo_labels", "GIMConfig", "hard_half", (5, 3, 1)),
    ("birdset.train", "BirdTrainConfig", "warmup_frac", 1.0),
    ("birdset.train", "BirdTrainConfig", "decoding", "middle"),
    ("birdset.augment", "AugmentConfig", "p_mix", 1.5),
    ("birdset.augment", "AugmentConfig", "snr_db", (3.0, math.nan)),
    ("birdset.augment", "AugmentConfig", "gain_db", (-18.0, 0.0, 6.0)),
    ("birdset.features", "MelConfig", "top_db", math.inf),
    ("improver.agent", "ImProverConfig", "examples", -1),
    ("improver.agent", "ImProverConfig", "keep_best", 1),
    ("improver.agent", "ImProverConfig", "on_none", "best"),
]


def _config_class(slug: str):
    return importlib.import_module(f"iclr25.{slug}.experiment").Config


@pytest.mark.parametrize(("slug", "name", "value"), PARAMS, ids=[f"{s}-{n}-{v!r}" for s, n, v in PARAMS])
def test_a_bad_value_is_refused_naming_field_value_and_expectation(slug, name, value):
    cls = _config_class(slug)
    check = next(f for f in dataclasses.fields(cls) if f.name == name).metadata.get("check")
    assert isinstance(check, Check), f"{slug}.Config.{name} is not declared with bounded()"
    with pytest.raises(ValueError) as e:
        cls(**{name: value})
    assert re.fullmatch(rf"{name} must be .+, got {re.escape(repr(value))}", str(e.value)), str(e.value)
    assert check.expected() in str(e.value)


@pytest.mark.parametrize(
    ("module", "cls_name", "name", "value"), LIB_CASES, ids=[f"{c[1]}-{c[2]}" for c in LIB_CASES]
)
def test_library_configs_refuse_a_bad_value_the_same_way(module, cls_name, name, value):
    cls = getattr(importlib.import_module(f"iclr25.{module}"), cls_name)
    check = next(f for f in dataclasses.fields(cls) if f.name == name).metadata.get("check")
    assert isinstance(check, Check), f"{cls_name}.{name} is not declared with bounded()"
    cls()  # the defaults pass
    with pytest.raises(ValueError) as e:
        cls(**{name: value})
    assert str(e.value) == f"{name} must be {check.expected()}, got {value!r}"


@pytest.mark.parametrize("slug", sorted(CASES))
def test_defaults_and_presets_pass_their_declared_bounds(slug):
    mod = importlib.import_module(f"iclr25.{slug}.experiment")
    mod.Config()
    for cfg in mod.PRESETS.values():
        dataclasses.replace(cfg)  # re-runs __post_init__: every declared bound and cross-field rule
