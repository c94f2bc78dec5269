"""The papers' experiments at laptop scale (one module each), registered as slow paper_checks claims.

``shifted_digits`` (Horn et al. Sec. 3), ``sparse_task`` (Chowdhury et al. Sec. 4.2, App. E), ``variance_metrics``
(Sec. 4.1), ``eigenvalues`` (Table 4), ``listops`` (Table 2, ListOps); shared machinery in ``_harness`` and the
data generators in ``data``. Each has ``SIZES`` (tiny / small / full), ``run(size, seed, out_dir)`` writing JSON +
PNG, and ``decide(record)``, the pre-registered criterion. The claims live in ``paper_checks/horn/experiments.py``
and ``paper_checks/chowdhury/experiments.py``.
"""
