"""The authors' published numbers behind the trained claims, transcribed with their source.

These are the data on which each trained claim's decision rule is calibrated
(:mod:`paper_checks.experiments.calibration`): applied to them, the rule must return the paper's stated
verdict, and a negative control from the same data must fail it. Every number is copied from the file and
line (or table) named beside it; nothing is computed here.

* Horn et al.: the authors' repository :data:`HORN_REPO` at commit :data:`HORN_COMMIT`:
  ``results/model_evaluations.csv`` (one row per trained run; ``test/acc`` is column 29) and
  ``results/FashionMNIST_1_shift.csv`` / ``results/MNIST_1_shift.csv`` (``accuracy_mean`` of the "Trouser"
  / digit-1 test images that can be shifted 8 px both ways, per shift in pixels; Fig. 1).
* Choromanski et al. (FLT): Table 2 of the paper (image classification, one run per model).
* Chowdhury et al. (KL): Table 2 (LRA, test accuracy in %), Table 4 (eigenvalues of the learnt
  covariances) and Table 14's ratio column std(GMM-PRF) / std(GMM-RKS) (headed "GMM-RKS/GMM-PRF"; the
  table's own columns give PRF/RKS: ``kl.table14-ratio-columns``). Their code, :data:`KL_REPO` at commit
  :data:`KL_COMMIT` (text, retrieval and ListOps; no sparse-task code), is cited by the KL provenance
  tables (``listops.PROVENANCE``, ``sparse_task.PROVENANCE``); it publishes no run records.
"""

from __future__ import annotations

__all__ = ["HORN_REPO", "HORN_COMMIT", "HORN_RUNS_FILE", "HORN_RUNS", "HORN_SHIFT_FILES", "HORN_SHIFTS",
           "HORN_SHIFT_PX", "HORN_TABLE1", "horn_run", "FLT_TABLE2", "FLT_TEST_IMAGES", "KL_REPO",
           "KL_COMMIT", "KL_TABLE2", "KL_TABLE4", "KL_TABLE14_STD_RATIO"]

HORN_REPO = "github.com/ExpectationMax/Translational-Equivariant-Performers"
HORN_COMMIT = "c7a55af3b581426512eb4a57d3a13eb20e93fbd6"
HORN_RUNS_FILE = "results/model_evaluations.csv"
KL_REPO = "github.com/cs1160701/OnLearningTheKernel"
KL_COMMIT = "a8e3d3bb80bd866c52a9d9ef5e4f8f5a771c65e6"

#: (dataset, model, variant, test/acc, line of results/model_evaluations.csv). Models as the authors name
#: them: NoposPerformer = No Pos., Performer = Absolute, RelativePerformer = Rel. S1,
#: ClippedRelativePerformer = Rel. S2. Variants: ``redrawK`` = feature_redraw_interval K (column 10, the
#: experiment resize_fixed_relative_redrawK); ``clipK`` = clipping distance K (column 4 of the
#: clipped_relative rows, which record no redraw interval).
HORN_RUNS = (
    ("MNIST", "RelativePerformer", "redraw100", 0.984681606, 11),
    ("FashionMNIST", "Performer", "redraw100", 0.904685616, 12),
    ("MNIST", "Performer", "redraw100", 0.988886654, 13),
    ("CIFAR10", "NoposPerformer", "redraw100", 0.517020404, 14),
    ("FashionMNIST", "NoposPerformer", "redraw100", 0.675010026, 15),
    ("MNIST", "NoposPerformer", "redraw100", 0.441830188, 16),
    ("CIFAR10", "RelativePerformer", "redraw100", 0.609731674, 17),
    ("CIFAR10", "Performer", "redraw100", 0.695034027, 18),
    ("FashionMNIST", "RelativePerformer", "redraw100", 0.893472195, 19),
    ("MNIST", "RelativePerformer", "redraw1", 0.418502212, 26),
    ("CIFAR10", "RelativePerformer", "redraw1", 0.614337206, 27),
    ("FashionMNIST", "RelativePerformer", "redraw1", 0.8796556, 28),
    ("FashionMNIST", "Performer", "redraw1000", 0.905887067, 29),
    ("FashionMNIST", "NoposPerformer", "redraw1000", 0.672506988, 30),
    ("MNIST", "Performer", "redraw1000", 0.988486171, 31),
    ("CIFAR10", "NoposPerformer", "redraw1000", 0.527432919, 32),
    ("CIFAR10", "RelativePerformer", "redraw1000", 0.664497375, 33),
    ("MNIST", "RelativePerformer", "redraw1000", 0.987685204, 34),
    ("FashionMNIST", "RelativePerformer", "redraw1000", 0.904184997, 35),
    ("CIFAR10", "Performer", "redraw1000", 0.693632364, 36),
    ("MNIST", "NoposPerformer", "redraw1000", 0.449839801, 37),
    ("CIFAR10", "ClippedRelativePerformer", "clip4", 0.582758248, 38),
    ("FashionMNIST", "ClippedRelativePerformer", "clip2", 0.830196261, 39),
    ("FashionMNIST", "ClippedRelativePerformer", "clip6", 0.842837155, 40),
    ("MNIST", "ClippedRelativePerformer", "clip4", 0.924592435, 41),
    ("CIFAR10", "ClippedRelativePerformer", "clip2", 0.546656013, 42),
    ("MNIST", "ClippedRelativePerformer", "clip6", 0.946978807, 43),
    ("FashionMNIST", "ClippedRelativePerformer", "clip4", 0.866586685, 44),
    ("MNIST", "ClippedRelativePerformer", "clip2", 0.889867842, 45),
)

#: Horn et al., Table 1 (test accuracy, %) as printed (horn-...-attention.md lines 104-107): model ->
#: (MNIST, Fashion-MNIST, CIFAR-10).
HORN_TABLE1 = {"NoposPerformer": (45.0, 67.3, 52.7), "Performer": (98.8, 90.6, 69.4),
               "RelativePerformer": (98.8, 90.4, 66.4), "ClippedRelativePerformer": (94.7, 86.7, 61.4)}

HORN_SHIFT_FILES = {"FashionMNIST": "results/FashionMNIST_1_shift.csv", "MNIST": "results/MNIST_1_shift.csv"}
HORN_SHIFT_PX = tuple(range(-8, 9))
#: dataset -> model -> (first line, accuracy_mean at shifts -8..8 px): the row of shift s is on line
#: ``first + s + 8``. Values rounded to 6 decimals (the files hold float32 means over 791 F-MNIST trousers
#: and 854 MNIST ones).
HORN_SHIFTS = {
    "FashionMNIST": {
        "Performer": (2, (0.0, 0.0, 0.0, 0.001264, 0.007585, 0.027813, 0.509482, 0.970923, 0.99115,
                          0.984829, 0.983565, 0.97598, 0.906448, 0.446271, 0.021492, 0.02402, 0.001264)),
        "RelativePerformer": (19, (0.896334, 0.907712, 0.948167, 0.97598, 0.982301, 0.988622, 0.989886,
                                   0.99115, 0.992415, 0.989886, 0.988622, 0.987358, 0.988622, 0.987358,
                                   0.987358, 0.986094, 0.983565)),
        "ClippedRelativePerformer": (36, (0.394437, 0.472819, 0.740834, 0.819216, 0.873578, 0.924147,
                                          0.95196, 0.973451, 0.986094, 0.989886, 0.989886, 0.989886,
                                          0.986094, 0.982301, 0.968394, 0.930468, 0.920354)),
    },
    "MNIST": {
        "Performer": (2, (0.257611, 0.423888, 0.569087, 0.730679, 0.907494, 0.97541, 0.98829, 0.992974,
                          0.992974, 0.994145, 0.991803, 0.98829, 0.984778, 0.911007, 0.793911, 0.735363,
                          0.581967)),
        "RelativePerformer": (19, (1.0, 0.998829, 0.997658, 0.997658, 0.998829, 1.0, 1.0, 1.0, 1.0, 1.0,
                                   1.0, 1.0, 1.0, 1.0, 0.998829, 0.998829, 0.996487)),
        "ClippedRelativePerformer": (70, (0.978923, 0.991803, 0.992974, 0.995316, 0.995316, 0.995316,
                                          0.995316, 0.995316, 0.995316, 0.995316, 0.995316, 0.995316,
                                          0.995316, 0.994145, 0.992974, 0.980094, 0.964871)),
    },
}


def horn_run(dataset: str, model: str, variant: str) -> tuple[float, int]:
    """(test accuracy, CSV line) of the one row of :data:`HORN_RUNS`; KeyError naming the row otherwise."""
    rows = [(a, line) for d, m, v, a, line in HORN_RUNS if (d, m, v) == (dataset, model, variant)]
    if len(rows) != 1:
        raise KeyError(f"no single row ({dataset}, {model}, {variant}) in HORN_RUNS")
    return rows[0]


#: FLT paper, Table 2 (image classification accuracy, %), Fashion-MNIST column; one run per model, 10,000
#: test images (Table 4 of the appendix).
FLT_TABLE2 = {"Performer": 91.1, "CosFormer": 91.6, "FLT": 92.1}
FLT_TEST_IMAGES = 10_000

#: KL paper, Table 2 (LRA test accuracy, %; Text on the validation set): (ListOps, Text) per model.
KL_TABLE2 = {"softmax": (36.38, 64.27), "gmm-rks": (18.55, 63.95), "fastfood-rks": (18.65, 65.67),
             "generative-rks": (18.50, 66.50), "gmm-prf": (36.96, 62.64), "fastfood-prf": (37.05, 64.66),
             "generative-prf": (37.42, 62.90), "random": (10.00, 50.00)}

#: KL paper, Table 4: (task, model) -> (max eigenvalue, mean eigenvalue) of the learnt covariances.
KL_TABLE4 = {("text", "gmm-rks"): (0.486, 0.031), ("text", "gmm-prf"): (0.096, 0.025),
             ("retrieval", "gmm-rks"): (0.499, 0.053), ("retrieval", "gmm-prf"): (0.186, 0.042)}

#: KL paper, Table 14 (Appendix E.3), the Std. Dev. ratio column (std GMM-PRF / std GMM-RKS of the
#: classifier-layer gradients), per sparsity p at the 20/40/60/80 % checkpoints.
KL_TABLE14_STD_RATIO = {0.1: (0.960974, 1.171828, 1.162868, 1.179433),
                        0.5: (6.231835, 55.68558, 26.30681, 134.6289),
                        0.9: (1.106237, 1.137784, 1.058737, 1.232546)}
