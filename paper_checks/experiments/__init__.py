"""The papers' experiments at laptop scale (one module each), run by slow paper_checks claims.

``images`` (Horn et al. Table 1 / Fig. 1 and FLT's image classification on Fashion-MNIST, read by ``idx``),
``sparse_task`` (Chowdhury et al. Sec. 4.2, App. E), ``variance_metrics`` (Sec. 4.1), ``eigenvalues`` (Table
4), ``listops`` (Table 2, ListOps); shared machinery in ``harness``, what every trained model is measured by
in ``measures`` and the data generators in ``data``. Each Chowdhury module has ``SIZES`` (tiny / small /
full), ``run(size, seed, out_dir)`` writing JSON + PNG, and ``decide(record)``, the pre-registered criterion;
``images`` trains a (method, seed) grid through ``ctx.map`` shared by its three claims. The image and
sparse-task grids are trained on a budget ladder (1/4, 1/2 and 1 of a size's steps; ListOps has none) and
decided under the verdict taxonomy: ``images_ladder`` and ``sparse_ladder`` train a ladder into a report's
cache, ``images_rules`` and ``sparse_rules`` hold the rules. The claims live in
``paper_checks/horn/experiments.py``, ``paper_checks/chowdhury/experiments.py`` and
``paper_checks/choromanski/experiments.py``.
"""
