"""The paper's back-view enhancer — ControlNet-tile on Stable Diffusion 1.5 in img2img mode (HGM §3.3, Fig. 2) —
for users who have the weights locally. Nothing is downloaded: ``from_pretrained`` reads local folders only
(``local_files_only=True``) and raises a clear error when they are missing; ``from_config`` builds randomly
initialised models from config dicts (tests use a tiny configuration).

Inference defaults follow the released inference script: prompt "best quality", the negative prompt below,
strength 0.2, 100 steps, guidance 5.0, a fixed seed; the condition image is the coarse back render itself.
The ControlNet's training for this task is not described in the paper; the public ``control_v11f1e_sd15_tile``
weights are what the released code loads.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from torch import Tensor

__all__ = ["ControlNetBackRefiner"]

PROMPT = "best quality"
NEGATIVE_PROMPT = "blur, lowres, bad anatomy, bad hands, cropped, worst quality"
_SD_PARTS = ("unet", "vae", "text_encoder", "tokenizer", "scheduler")


def _require_diffusers():
    try:
        import diffusers
    except ImportError as e:  # pragma: no cover - exercised only without the extra
        raise ImportError(
            "ControlNetBackRefiner needs `diffusers` (and `transformers` for the full pipeline); "
            "install the project's `human` extra"
        ) from e
    return diffusers


class ControlNetBackRefiner:
    """ControlNet + UNet (+ VAE, text encoder, tokenizer for the full pipeline) and a scheduler.

    ``denoise_step`` runs one classifier-free-guidance-free denoising step in latent space (ControlNet residuals
    added to the UNet's skip connections); ``__call__`` runs the paper's img2img pipeline on coarse back renders.
    """

    def __init__(self, controlnet, unet, scheduler, vae=None, text_encoder=None, tokenizer=None):
        self.controlnet, self.unet, self.scheduler = controlnet, unet, scheduler
        self.vae, self.text_encoder, self.tokenizer = vae, text_encoder, tokenizer

    # --- construction -----------------------------------------------------------------------------------------
    @classmethod
    def from_pretrained(
        cls,
        sd_path: str | Path,
        controlnet_path: str | Path,
        torch_dtype: torch.dtype | None = None,
    ) -> ControlNetBackRefiner:
        """Load SD 1.5 (diffusers folder layout: unet/, vae/, text_encoder/, tokenizer/, scheduler/) and a tile
        ControlNet (e.g. ``lllyasviel/control_v11f1e_sd15_tile``) from local folders; never touches the network."""
        d = _require_diffusers()
        sd, cn = Path(sd_path), Path(controlnet_path)
        missing = [str(sd / p) for p in _SD_PARTS if not (sd / p).is_dir()]
        if not (cn / "config.json").is_file():
            missing.append(str(cn / "config.json"))
        if missing:
            raise FileNotFoundError(
                "ControlNetBackRefiner.from_pretrained needs local weights (nothing is downloaded): a Stable "
                "Diffusion 1.5 folder in diffusers layout (sd_path) and a tile ControlNet folder (controlnet_path, "
                "e.g. lllyasviel/control_v11f1e_sd15_tile). Missing: " + ", ".join(missing)
            )
        from transformers import CLIPTextModel, CLIPTokenizer

        kw: dict[str, Any] = {"local_files_only": True}
        if torch_dtype is not None:
            kw["torch_dtype"] = torch_dtype
        return cls(
            controlnet=d.ControlNetModel.from_pretrained(cn, **kw),
            unet=d.UNet2DConditionModel.from_pretrained(sd, subfolder="unet", **kw),
            scheduler=d.DDIMScheduler.from_pretrained(sd, subfolder="scheduler", local_files_only=True),
            vae=d.AutoencoderKL.from_pretrained(sd, subfolder="vae", **kw),
            text_encoder=CLIPTextModel.from_pretrained(sd, subfolder="text_encoder", **kw),
            tokenizer=CLIPTokenizer.from_pretrained(sd, subfolder="tokenizer", local_files_only=True),
        )

    @classmethod
    def from_config(
        cls,
        unet_config: dict,
        controlnet_kwargs: dict | None = None,
        scheduler_config: dict | None = None,
    ) -> ControlNetBackRefiner:
        """Randomly initialised UNet from ``unet_config`` and a ControlNet copied from it (``ControlNetModel.from_unet``,
        zero-initialised output convolutions, as ControlNet training starts); DDIM scheduler."""
        d = _require_diffusers()
        if not isinstance(unet_config, dict):
            raise ValueError(
                f"unet_config must be a dict of UNet2DConditionModel arguments; got {type(unet_config)}"
            )
        unet = d.UNet2DConditionModel.from_config(unet_config)
        controlnet = d.ControlNetModel.from_unet(unet, **(controlnet_kwargs or {}))
        scheduler = d.DDIMScheduler(**(scheduler_config or {}))
        return cls(controlnet, unet, scheduler)

    # --- inference --------------------------------------------------------------------------------------------
    def predict_noise(
        self,
        latents: Tensor,
        t: Tensor | int,
        cond_image: Tensor,
        encoder_hidden_states: Tensor,
        conditioning_scale: float = 1.0,
    ) -> Tensor:
        """UNet noise prediction with the ControlNet's residuals. ``latents`` (B, C, h, w); ``cond_image``
        (B, 3, H, W) in [0, 1] at the ControlNet's conditioning resolution; ``encoder_hidden_states`` (B, L, D)."""
        if latents.dim() != 4 or cond_image.dim() != 4 or cond_image.shape[1] != 3:
            raise ValueError(
                f"latents must be (B, C, h, w) and cond_image (B, 3, H, W); got {tuple(latents.shape)}, "
                f"{tuple(cond_image.shape)}"
            )
        if not torch.isfinite(cond_image).all() or not torch.isfinite(latents).all():
            raise ValueError("latents and cond_image must be finite (no NaN/inf)")
        down, mid = self.controlnet(
            latents,
            t,
            encoder_hidden_states=encoder_hidden_states,
            controlnet_cond=cond_image,
            conditioning_scale=conditioning_scale,
            return_dict=False,
        )
        return self.unet(
            latents,
            t,
            encoder_hidden_states=encoder_hidden_states,
            down_block_additional_residuals=down,
            mid_block_additional_residual=mid,
        ).sample

    def denoise_step(
        self, latents: Tensor, t: Tensor | int, cond_image: Tensor, encoder_hidden_states: Tensor
    ) -> tuple[Tensor, Tensor]:
        """One scheduler step: returns (noise prediction, previous latents)."""
        eps = self.predict_noise(latents, t, cond_image, encoder_hidden_states)
        return eps, self.scheduler.step(eps, t, latents).prev_sample

    def pipeline(self):
        """The diffusers ``StableDiffusionControlNetImg2ImgPipeline`` (needs the VAE, text encoder, tokenizer)."""
        d = _require_diffusers()
        if self.vae is None or self.text_encoder is None or self.tokenizer is None:
            raise ValueError(
                "the full img2img pipeline needs vae, text_encoder and tokenizer (use from_pretrained with local "
                "Stable Diffusion 1.5 weights); from_config builds only the UNet and ControlNet"
            )
        return d.StableDiffusionControlNetImg2ImgPipeline(
            vae=self.vae,
            text_encoder=self.text_encoder,
            tokenizer=self.tokenizer,
            unet=self.unet,
            controlnet=self.controlnet,
            scheduler=self.scheduler,
            safety_checker=None,
            feature_extractor=None,
            requires_safety_checker=False,
        )

    @torch.no_grad()
    def __call__(
        self,
        coarse_back: Tensor,
        strength: float = 0.2,
        num_inference_steps: int = 100,
        guidance_scale: float = 5.0,
        seed: int = 0,
        prompt: str = PROMPT,
        negative_prompt: str = NEGATIVE_PROMPT,
    ) -> Tensor:
        """Enhance coarse back renders (B, H, W, 3) in [0, 1] (H, W multiples of 8) → (B, H, W, 3) in [0, 1]."""
        if coarse_back.dim() != 4 or coarse_back.shape[-1] != 3:
            raise ValueError(f"coarse_back must be (B, H, W, 3); got {tuple(coarse_back.shape)}")
        if coarse_back.shape[1] % 8 or coarse_back.shape[2] % 8:
            raise ValueError(
                f"coarse_back height and width must be multiples of 8; got {tuple(coarse_back.shape)}"
            )
        if not 0 < strength <= 1:
            raise ValueError(f"strength must be in (0, 1]; got {strength}")
        img = coarse_back.permute(0, 3, 1, 2).clamp(0, 1)
        pipe = self.pipeline()
        gen = torch.Generator(device="cpu").manual_seed(seed)
        out = pipe(
            prompt=[prompt] * len(img),
            negative_prompt=[negative_prompt] * len(img),
            image=img,
            control_image=img,
            strength=strength,
            num_inference_steps=num_inference_steps,
            guidance_scale=guidance_scale,
            generator=gen,
            output_type="pt",
        ).images
        return out.permute(0, 2, 3, 1)
