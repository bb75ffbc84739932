"""``transformers.Trainer`` that checkpoints only the Quantum-PEFT adapter (safetensors), as PEFT models do.

``Trainer`` saves ``save_pretrained`` output only for ``PreTrainedModel`` / ``peft.PeftModel``; for any other
module it writes the *whole* ``state_dict`` to ``model.safetensors``. ``QuantumPEFTTrainer`` overrides
``_save`` so that ``save_model`` and every checkpoint write ``qpeft_adapter_model.safetensors`` +
``qpeft_adapter_config.json`` (reload with ``QuantumPEFTModel.from_pretrained(base, directory)``).
Everything else is the stock ``Trainer``; ``QuantumPEFTModel.forward`` carries the base model's signature, so
``remove_unused_columns=True`` (the default) keeps the right dataset columns.

Not supported: ``resume_from_checkpoint`` / ``load_best_model_at_end`` (they expect full model weights).
"""

from __future__ import annotations

from transformers import Trainer

from .model import QuantumPEFTModel


class QuantumPEFTTrainer(Trainer):
    """``Trainer`` for a :class:`QuantumPEFTModel`: adapter-only, safetensors-only checkpoints."""

    def __init__(self, model: QuantumPEFTModel | None = None, *args, **kwargs) -> None:
        if not isinstance(model, QuantumPEFTModel):
            raise ValueError(
                f"model must be a QuantumPEFTModel (from get_qpeft_model), got {type(model).__name__}"
            )
        super().__init__(model, *args, **kwargs)
        if self.args.load_best_model_at_end:
            raise ValueError("load_best_model_at_end is not supported: checkpoints hold only the adapter")

    def _save(self, output_dir: str | None = None, state_dict: dict | None = None) -> None:
        output_dir = output_dir if output_dir is not None else self.args.output_dir
        model = self.accelerator.unwrap_model(self.model)
        model.save_pretrained(output_dir, is_main_process=self.args.should_save)
        if self.args.should_save and self.processing_class is not None:
            self.processing_class.save_pretrained(output_dir)
