"""What two or more systems share: seeding, devices, atomic I/O, claims and run folders, statistics, formatting
and rendering of claims, figures, provenance, progress bars, config-field bounds, tiny LMs and the LM training
loop. Import the module you need (``from iclr25.common.results import RunDir``); this package imports nothing, so
``import iclr25.common.<module>`` (e.g. by the CLI) does not pull in torch.
"""
