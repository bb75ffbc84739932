"""What two or more systems share: the experiment contract (``ExperimentConfig``, ``config_hash``, ``aggregate``,
``values``, timing keys), seeding, devices, atomic I/O, claims, statistics, number formatting, figures, progress
bars, config-field bounds, tiny LMs and the LM training loop. Import the module you need (``from
iclr25.common.results import ExperimentConfig``); this package imports nothing, so ``import
iclr25.common.<module>`` (e.g. by the CLI) does not pull in torch. The run path (run folders, seed workers,
provenance, the claims renderer) is :mod:`iclr25.harness`, which nothing here imports.
"""
