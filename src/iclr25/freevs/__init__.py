"""FreeVS: Generative View Synthesis on Free Driving Trajectory (Wang et al., ICLR 2025, arXiv:2410.18079).

https://arxiv.org/abs/2410.18079

FreeVS renders camera views on trajectories the car never drove. Coloured LiDAR points are projected into the
target camera as a sparse *pseudo-image* (exact geometry, holes where nothing was seen, §3.1); a video diffusion
model conditioned on the pseudo-images fills in appearance (§3.3). Training pairs simulate viewpoint changes by
rendering each frame's pseudo-image from points observed at another time (§3.2), so at test time an edited camera
pose needs no per-scene reconstruction. This package gives the pseudo-image renderer (vectorised z-buffer,
objects-first dilated occupancy), LiDAR colouring, the viewpoint simulation, FreeVS-tiny (diffusers UNet2DModel +
EDMEulerScheduler, condition dropout, CFG, temporal layer), the paper's SVD UNet config for GPU users, the ToyDrive
world with ground truth on any trajectory, and the metrics (PSNR, hole-PSNR, SSIM, detection AP, FD-proxy).
"""

from .metrics import average_precision, fill_holes, frechet_distance, psnr, ssim
from .model import EDMConfig, FreeVSTiny, edm_loss, loss_weight, precondition, sample, svd_unet
from .pseudo import (
    LidarLog,
    colour_points,
    project,
    project_points,
    pseudo_image,
    record_drive,
    window,
    zbuffer,
)
from .world import Camera, ToyDriveScene, camera_pose, check_pose, pixel_rays

__all__ = [
    "Camera",
    "EDMConfig",
    "FreeVSTiny",
    "LidarLog",
    "ToyDriveScene",
    "average_precision",
    "camera_pose",
    "check_pose",
    "colour_points",
    "edm_loss",
    "fill_holes",
    "frechet_distance",
    "loss_weight",
    "pixel_rays",
    "precondition",
    "project",
    "project_points",
    "pseudo_image",
    "psnr",
    "record_drive",
    "sample",
    "ssim",
    "svd_unet",
    "window",
    "zbuffer",
]
