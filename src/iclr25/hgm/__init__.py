"""HGM — Generalizable Human Gaussians from Single-View Image (ICLR 2025).

Chen, Li, Zhang, Zhu, Huang, Chen, Lee; arXiv 2406.06050 (https://arxiv.org/abs/2406.06050).

HGM reconstructs a 3D Gaussian human from one image. An LGM-style image branch turns the input (RGB + Plücker
rays) into a per-pixel splat map of Gaussians; a body branch attaches a learnable code to every vertex of an
estimated parametric body, gathers projected image features by multi-view attention and predicts body-anchored
Gaussians; a 3D fusion network lets the image Gaussians read the body features. All three Gaussian sets are
rendered and supervised. At inference, generate-then-refine renders the coarse result's back view, enhances it
(a ControlNet in the paper) and feeds [front, enhanced back] to a two-view model.

This package provides the differentiable renderer (pure PyTorch EWA splatting with gsplat's conventions,
tile-culled; gsplat's CUDA kernels on GPU), cameras and Plücker rays, activations and metrics, the HGM model
(image branch, body branch, 3-D fusion, three supervised Gaussian sets), the back-view refiner, a ``BodyModel``
protocol with a procedural capsule body, and the ToyHumans dataset (offline, seeded, cached).

Public API::

    from iclr25.hgm import orbit_cameras, render_gaussians
    out = render_gaussians(means, quats, scales, opacities, colours, orbit_cameras(12, 32, 32))  # out.image (12,32,32,3)
"""

from .cameras import (
    Camera,
    intrinsics_from_fov,
    look_at,
    orbit_cameras,
    pixel_rays,
    plucker_rays,
    project_points,
    unproject_pixels,
)
from .controlnet import ControlNetBackRefiner
from .gaussians import GAUSSIAN_DIM, GaussianSet, activate_gaussians, sample_image_features, sample_volume
from .metrics import chamfer_distance, psnr, ssim
from .model import HGM, BackViewRefiner, HGMConfig, HGMOutput, downscale_camera, hgm_loss
from .renderer import (
    RenderOutput,
    composite,
    project_gaussians,
    quat_scale_to_covar,
    quat_to_rotmat,
    render_gaussians,
)
from .toyhumans import BodyModel, CapsuleBody, ToyHumans, make_toyhumans, zbuffer_render

__all__ = [
    "GAUSSIAN_DIM",
    "Camera",
    "GaussianSet",
    "RenderOutput",
    "activate_gaussians",
    "chamfer_distance",
    "composite",
    "intrinsics_from_fov",
    "look_at",
    "orbit_cameras",
    "pixel_rays",
    "plucker_rays",
    "project_gaussians",
    "project_points",
    "psnr",
    "quat_scale_to_covar",
    "quat_to_rotmat",
    "render_gaussians",
    "sample_image_features",
    "sample_volume",
    "ssim",
    "unproject_pixels",
    "HGM",
    "HGMConfig",
    "HGMOutput",
    "hgm_loss",
    "BackViewRefiner",
    "ControlNetBackRefiner",
    "downscale_camera",
    "BodyModel",
    "CapsuleBody",
    "ToyHumans",
    "make_toyhumans",
    "zbuffer_render",
]
