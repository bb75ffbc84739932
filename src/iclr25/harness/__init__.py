"""The run path: everything between ``iclr25 run SLUG`` (or :func:`iclr25.run`) and a system's ``run(cfg, out)``.

===============  ========================================================================================
``cli``          the command line (``iclr25 list | run | config | verify | report | assets``), a thin shell
``runs``         one run: output folder, run lock, ``exp.run`` under the run context, provenance, documents
``configs``      the effective config (preset, ``--set`` overrides, seeds, device resolved once), offline env
``launch``       where missing seeds are computed elsewhere: spawned GPU workers, torchrun, submitit jobs
``rundir``       ``RunDir`` (per-seed files that resume, checked) and ``RunResult`` (what ``run`` returns)
``workers``      the local seed-worker pool, the run context a worker replays under, ``--jobs``
``interrupts``   SIGINT/SIGTERM: remembered, checked before anything is written, held back around renames
``locks``        one writer per run folder (``<folder>/.lock``)
``artefacts``    config.json, metrics.json, timings.json, report.md, claims.json written as one unit
``provenance``   commit, date, machine, load, versions attached to claims.json
``render``       the claims as text / markdown (CLI summary, report.md, the HTML report)
``verify``       ``iclr25 verify``: re-run a committed reference and compare
===============  ========================================================================================

Systems' ``experiment.py`` / ``real.py`` import ``RunDir`` and ``RunResult`` from :mod:`iclr25.harness.rundir`;
``iclr25.common`` (what the systems share) never imports this package. This ``__init__`` imports nothing.
"""
