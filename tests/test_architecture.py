"""The package's layering, read from the source (``ast``): a forbidden import fails here, not in review.

Allowed layering (docs/guide/foundation.md, "Two APIs"); imports only point down::

    refattn.nn        models: config, kinds/ (one module per attention kind), mha, transformer, optim, train,
       |              checkpoint, init (NumPy edge: draws a model from the kinds' declarations)
    refattn.rpe       relative positional encodings (S1, S2, Toeplitz, FLT and its spectra)
       |
    refattn.attention softmax, kernel, linear, FAVOR
       |
    refattn.features  feature maps (trig, positive, GMM, FastFood, generative, deterministic)
       |
    refattn.layers    dense, layer/batch norm, activations, dropout, embeddings, losses
       |
    refattn._xp, refattn._dispatch, refattn.tree      namespace, checks, dispatch point, tree walker

    refattn.random    NumPy edge (draws): may import layers, features, rpe, _xp, tree -- never nn
    validation, paper_checks -> refattn;  accel -> refattn._dispatch only (it registers itself)
    paper_checks -> validation;  refattn (any module) -> accel, validation, paper_checks: forbidden
    accel -> validation, paper_checks and validation -> accel, paper_checks: forbidden

Inside ``paper_checks`` and ``validation`` the layers their package docstrings draw (``LAYERS`` below, bottom
first): a module imports from its own layer or a lower one, and every module belongs to a layer.

Besides the arrows: no import cycle inside refattn, accel, validation or paper_checks (function-local imports
count), no module-level ``__getattr__`` (PEP 562 lazy attributes hide cycles), every import of a refattn
module from refattn at module top (an optional third-party import such as tqdm may stay local), and every
package ``__init__`` is a plain list of names (a docstring, ``from .x import a, b`` lines, ``__version__`` and
one ``__all__``: a list of strings or the comprehension ``[n for n in dir() if not n.startswith("_")]``; no
star imports, no code).

The two APIs (docs/guide/foundation.md, "Two APIs: checked over unchecked"): no module imports an
underscore-prefixed name from another module (nor reads one as ``module._name``); a private module
(``_causal.py``) or private package is imported only from inside the package that holds it; every function
``f_core`` in refattn has its public ``f`` in the same module, takes ``xp`` as a required keyword-only
argument and checks nothing but its own result (outside the NumPy edge ``refattn.random``); no ``*_core``
name is in an ``__all__`` or imported by a package ``__init__``.

An import ``from a.b import c`` is an arrow to ``a.b.c`` when that is a module, else to ``a.b``; the implicit
import of parent packages is not an arrow (every submodule would otherwise "import" its package).
"""

from __future__ import annotations

import ast
import functools
import importlib.util
import pathlib
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
CORE = "refattn"
#: The packages whose import graph is checked.
PACKAGES = ("refattn", "accel", "validation", "paper_checks")

#: (importer prefix, forbidden imported prefixes). A prefix matches the module and its submodules.
FORBIDDEN = [
    ("refattn", ("accel", "validation", "paper_checks")),
    ("refattn.layers", ("refattn.features", "refattn.attention", "refattn.rpe", "refattn.nn",
                        "refattn.random")),
    ("refattn.features", ("refattn.attention", "refattn.rpe", "refattn.nn", "refattn.random")),
    ("refattn.attention", ("refattn.rpe", "refattn.nn", "refattn.random")),
    ("refattn.rpe", ("refattn.nn", "refattn.random")),
    ("refattn.random", ("refattn.nn",)),
    ("refattn._xp", ("refattn.layers", "refattn.features", "refattn.attention", "refattn.rpe", "refattn.nn",
                     "refattn.random")),
    ("refattn.tree", ("refattn.layers", "refattn.features", "refattn.attention", "refattn.rpe", "refattn.nn",
                      "refattn.random")),
    ("accel", ("validation", "paper_checks")),
    ("validation", ("accel", "paper_checks")),
    ("paper_checks", ("accel",)),
]

#: (importer prefix, imported prefix, the only modules under it that may be imported).
ONLY = [
    ("accel", "refattn", ("refattn._dispatch",)),                      # accel registers itself, nothing more
]

#: Layers inside a package, bottom first: ``(name, module prefixes)``. A module imports from its own layer or
#: a lower one. The package itself (its ``__init__``) is named exactly, never as a prefix. Copied from the
#: package docstrings (paper_checks/__init__.py, validation/__init__.py): change both together.
LAYERS: dict[str, list[tuple[str, tuple[str, ...]]]] = {
    "paper_checks": [
        ("registry", ("paper_checks.registry", "paper_checks.rules", "paper_checks.mutations",
                      "paper_checks.figures", "paper_checks.report", "paper_checks.rounding")),
        ("runner", ("paper_checks.runner", "paper_checks.companions")),
        ("experiment drivers", ("paper_checks.experiments",)),
        ("per-paper claims", ("paper_checks.horn", "paper_checks.chowdhury", "paper_checks.choromanski")),
        ("catalog", ("paper_checks.catalog", "paper_checks.power", "paper_checks.redecide")),
        ("scale", ("paper_checks.scale",)),
        ("CLI", ("paper_checks.__main__", "paper_checks.readme_table", "paper_checks")),
    ],
    "validation": [
        ("numeric helpers", ("validation.assertions", "validation.gradcheck", "validation.montecarlo")),
        ("base types", ("validation.base",)),
        ("checks", ("validation.checks",)),
        ("families", ("validation.families",)),
        ("crosscheck adapters", ("validation.crosscheck",)),
        ("runner", ("validation.runner", "validation.worker")),
        ("findings", ("validation.findings",)),
        ("conformance", ("validation.conformance",)),
        ("CLI", ("validation.__main__", "validation")),
    ],
}

#: Private modules another package may import, with the reason.
PRIVATE_ACROSS = {("accel", "refattn._dispatch"): "accel registers its kernels at the dispatch point"}


#: Exceptions still open in files other work is changing right now. Each test fails once its
#: exception no longer applies, so that it is removed rather than kept as a blanket waiver.
PENDING_LOCAL_IMPORT: dict[str, str] = {}
PENDING_INIT: dict[str, str] = {}


def _module_name(path: pathlib.Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _is_package(path: pathlib.Path) -> bool:
    return path.name == "__init__.py"


def _modules(top: str) -> dict[str, pathlib.Path]:
    return {_module_name(p): p for p in sorted((ROOT / top).rglob("*.py"))}


ALL = {m: p for top in PACKAGES if (ROOT / top).exists() for m, p in _modules(top).items()}


def _resolve(importer: str, is_pkg: bool, node: ast.ImportFrom) -> str:
    if node.level == 0:
        return node.module or ""
    base = importer.split(".") if is_pkg else importer.split(".")[:-1]
    base = base[:len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def imports_of(source: str, name: str, is_pkg: bool) -> list[tuple[str, int, bool]]:
    """``[(imported module, line, at module top)]`` of a module's source (function-local imports included)."""
    tree = ast.parse(source)
    top_level = {id(n) for n in tree.body}
    out = []
    for node in ast.walk(tree):
        top = id(node) in top_level
        if isinstance(node, ast.Import):
            out += [(a.name, node.lineno, top) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = _resolve(name, is_pkg, node)
            for a in node.names:
                sub = f"{base}.{a.name}"
                out.append((sub if sub in ALL else base, node.lineno, top))
    return out


@functools.cache
def _full_graph() -> dict[str, tuple[tuple[str, int, bool], ...]]:
    return {m: tuple(imports_of(p.read_text(), m, _is_package(p))) for m, p in ALL.items()}


def _graph(top: str | None = None) -> dict[str, list[tuple[str, int, bool]]]:
    """The import graph of every checked package (or of one): ``{module: [(imported, line, at top)]}``."""
    return {m: list(imps) for m, imps in _full_graph().items() if top is None or _under(m, top)}


def _under(mod: str, prefix: str) -> bool:
    return mod == prefix or mod.startswith(prefix + ".")


def forbidden_arrows(graph) -> list[str]:
    bad = []
    for mod, imps in graph.items():
        for target, line, _ in imps:
            for importer, targets in FORBIDDEN:
                if _under(mod, importer) and any(_under(target, t) for t in targets):
                    rule = f"{importer} -> {', '.join(targets)}"
                    bad.append(f"{mod}:{line} imports {target} (forbidden: {rule})")
            for importer, into, allowed in ONLY:
                if (_under(mod, importer) and _under(target, into)
                        and not any(_under(target, a) for a in allowed)):
                    bad.append(f"{mod}:{line} imports {target} ({importer} may import only "
                               f"{', '.join(allowed)} from {into})")
    return bad


def _layer_of(mod: str, top: str, layers) -> int | None:
    for i, (_, prefixes) in enumerate(layers):
        if any(mod == p or (p != top and mod.startswith(p + ".")) for p in prefixes):
            return i
    return None


def layer_violations(graph, top: str, layers) -> list[str]:
    """Imports inside package `top` that point to a higher layer, and modules of `top` in no layer."""
    bad = []
    for mod, imps in graph.items():
        if not _under(mod, top):
            continue
        mine = _layer_of(mod, top, layers)
        if mine is None:
            bad.append(f"{mod} is in no layer of {top} (add it to LAYERS and to the package docstring)")
            continue
        for target, line, _ in imps:
            theirs = _layer_of(target, top, layers) if _under(target, top) else None
            if theirs is not None and theirs > mine:
                bad.append(f"{mod}:{line} imports {target} (layer '{layers[mine][0]}' imports the higher "
                           f"layer '{layers[theirs][0]}')")
    return bad


def cycles(graph) -> list[list[str]]:
    """Strongly connected components with more than one module (or a module importing itself): Tarjan."""
    edges = {m: sorted({t for t, _, _ in imps if t in graph}) for m, imps in graph.items()}
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1 or v in edges[v]:
                out.append(sorted(comp))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out


def test_no_forbidden_arrow():
    bad = forbidden_arrows(_graph())
    assert not bad, "forbidden imports:\n" + "\n".join(bad)


@pytest.mark.parametrize("top", PACKAGES)
def test_no_import_cycle(top):
    found = cycles(_graph(top))
    msg = "\n".join(" <-> ".join(c) for c in found)
    assert not found, f"import cycles in {top} (function-local imports included):\n" + msg


@pytest.mark.parametrize("top", sorted(LAYERS))
def test_imports_follow_the_layers(top):
    bad = layer_violations(_graph(top), top, LAYERS[top])
    assert not bad, f"{top}: imports against its layers (bottom first: " \
        f"{' < '.join(n for n, _ in LAYERS[top])}):\n" + "\n".join(bad)


def test_refattn_imports_at_module_top():
    graph = _graph(CORE)
    local = {m: [f"{m}:{line} imports {t} inside a function" for t, line, top in imps
                 if not top and _under(t, CORE)] for m, imps in graph.items()}
    local = {m: v for m, v in local.items() if v}
    stale = sorted(set(PENDING_LOCAL_IMPORT) - set(local))
    assert not stale, f"PENDING_LOCAL_IMPORT entries no longer needed (remove them): {stale}"
    bad = [line for m, v in local.items() if m not in PENDING_LOCAL_IMPORT for line in v]
    assert not bad, "imports of refattn modules belong at module top:\n" + "\n".join(bad)


def test_no_module_level_getattr():
    def defines_getattr(p):
        body = ast.parse(p.read_text()).body
        return any(isinstance(n, ast.FunctionDef) and n.name in ("__getattr__", "__dir__") for n in body)

    bad = [m for m, p in ALL.items() if defines_getattr(p)]
    assert not bad, f"module-level __getattr__/__dir__ (PEP 562) in {bad}"


def _is_dir_comprehension(value: ast.expr) -> bool:
    """``[n for n in dir() if ...]`` or ``sorted(n for n in dir() if ...)``: one comprehension over
    ``dir()``."""
    if (isinstance(value, ast.Call) and getattr(value.func, "id", None) == "sorted" and len(value.args) == 1
            and not value.keywords):
        value = value.args[0]
    if not isinstance(value, (ast.ListComp, ast.GeneratorExp)) or len(value.generators) != 1:
        return False
    it = value.generators[0].iter
    return (isinstance(it, ast.Call) and getattr(it.func, "id", None) == "dir" and not it.args
            and not it.keywords)


def _plain_init_problems(source: str) -> list[str]:
    problems, n_all = [], 0
    for i, node in enumerate(ast.parse(source).body):
        if i == 0 and isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            continue                                                             # the docstring
        if isinstance(node, ast.ImportFrom) and node.level >= 1:
            if any(a.name == "*" for a in node.names):
                problems.append(f"line {node.lineno}: star import")
            continue
        targets = [getattr(t, "id", None) for t in node.targets] if isinstance(node, ast.Assign) else []
        if targets in (["__all__"], ["__version__"]):
            n_all += targets == ["__all__"]
            if n_all > 1:
                problems.append(f"line {node.lineno}: __all__ assigned twice")
                continue
            if isinstance(node.value, (ast.List, ast.Constant)) and all(
                    isinstance(e, ast.Constant) for e in getattr(node.value, "elts", [])):
                continue
            if targets == ["__all__"] and _is_dir_comprehension(node.value):
                continue
        problems.append(f"line {node.lineno}: {type(node).__name__} is not a plain name list")
    return problems


def test_every_init_is_a_plain_list_of_names():
    bad = {m: pr for m, p in ALL.items() if _is_package(p)
           for pr in [_plain_init_problems(p.read_text())] if pr}
    stale = sorted(set(PENDING_INIT) - set(bad))
    assert not stale, f"PENDING_INIT entries no longer needed (remove them): {stale}"
    bad = {m: pr for m, pr in bad.items() if m not in PENDING_INIT}
    assert not bad, f"package __init__ files that are not plain name lists: {bad}"


# ---- the checks catch what they exist to catch (planted sources parsed as if they were refattn modules) ---
@pytest.mark.parametrize(("module", "source", "want"), [
    ("refattn.features.planted", "from ..nn import mha\n",
     "refattn.features.planted:1 imports refattn.nn.mha"),
    ("refattn.random.planted", "def f():\n    from refattn.nn.transformer import transformer\n",
     "refattn.random.planted:2 imports refattn.nn.transformer"),
    ("refattn.layers.planted", "import validation\n", "refattn.layers.planted:1 imports validation"),
])
def test_planted_forbidden_arrow_is_reported(module, source, want):
    graph = {**_graph(), module: imports_of(source, module, False)}
    assert any(b.startswith(want) for b in forbidden_arrows(graph)), forbidden_arrows(graph)


def test_planted_cycle_is_reported():
    graph = _graph()
    graph["refattn.layers.dense"] = graph["refattn.layers.dense"] + [("refattn.nn.transformer", 1, False)]
    assert any("refattn.layers.dense" in c and "refattn.nn.transformer" in c for c in cycles(graph))


def test_planted_init_code_is_reported():
    assert _plain_init_problems('"""doc"""\nfrom .a import *\n')
    assert _plain_init_problems('"""doc"""\ndef __getattr__(name):\n    pass\n')
    assert not _plain_init_problems('"""doc"""\nfrom .a import b\n__all__ = ["b"]\n')


@pytest.mark.parametrize("all_line", [
    '__all__ = [n for n in dir() if not n.startswith("_")]',
    '__all__ = sorted(n for n in dir() if not n.startswith("_"))',
])
def test_all_written_once_from_dir_is_a_plain_list(all_line):
    assert not _plain_init_problems(f'"""doc"""\nfrom .a import b\n{all_line}\n')


@pytest.mark.parametrize("all_lines", [
    '__all__ = ["b"]\n__all__ = [n for n in dir() if not n.startswith("_")]',       # written twice
    '__all__ = [n for n in globals() if not n.startswith("_")]',                    # not over dir()
    '__all__ = [n for n in dir() for _ in "ab"]',                                   # two generators
    '__all__ = list(dir())',
])
def test_planted_all_that_is_not_written_once_is_reported(all_lines):
    assert _plain_init_problems(f'"""doc"""\nfrom .a import b\n{all_lines}\n')


# ---- the two APIs: a checked public function over its unchecked core (docs/guide/foundation.md) -----------
def _is_private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _private_scope(module: str) -> str | None:
    """The package a private module (or a module inside a private package) belongs to, else None."""
    parts = module.split(".")
    return next((".".join(parts[:i]) for i, part in enumerate(parts) if _is_private(part)), None)


def private_name_problems(source: str, name: str, is_pkg: bool) -> list[str]:
    """Imports of underscore names from another module, reads of ``module._name``, and imports of a private
    module from outside the package that holds it, in the source of module `name`."""
    tree = ast.parse(source)
    bad, module_aliases = [], {}

    def check_module(target, line):
        scope = _private_scope(target)
        if scope is not None and not _under(name, scope) and not any(
                _under(name, imp) and target == mod for imp, mod in PRIVATE_ACROSS):
            bad.append(f"{name}:{line} imports the private module {target} from outside {scope}")

    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name.split(".")[0] in PACKAGES:
                    check_module(a.name, node.lineno)
                    if a.asname:
                        module_aliases[a.asname] = a.name
        elif isinstance(node, ast.ImportFrom):
            base = _resolve(name, is_pkg, node)
            if base.split(".")[0] not in PACKAGES:
                continue
            check_module(base, node.lineno)
            for a in node.names:
                sub = f"{base}.{a.name}"
                if sub in ALL:
                    check_module(sub, node.lineno)
                    module_aliases[a.asname or a.name] = sub
                elif _is_private(a.name):
                    bad.append(f"{name}:{node.lineno} imports the private name {a.name} from {base}")
    for node in ast.walk(tree):
        if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                and node.value.id in module_aliases and _is_private(node.attr)):
            bad.append(f"{name}:{node.lineno} reads the private name {node.attr} of "
                       f"{module_aliases[node.value.id]}")
    return bad


def core_problems(source: str, name: str) -> list[str]:
    """Every top-level ``f_core`` needs its public ``f`` in the same module (the checked layer over it)."""
    body = ast.parse(source).body
    defined = {n.name for n in body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
    defined |= {t.id for n in body if isinstance(n, ast.Assign) for t in n.targets if isinstance(t, ast.Name)}
    bad = []
    for n in body:
        if isinstance(n, ast.FunctionDef) and n.name.endswith("_core"):
            stem = n.name[:-len("_core")]
            if not stem or stem.startswith("_"):
                bad.append(f"{name}:{n.lineno} {n.name}: a core is named after its public function "
                           "(f -> f_core)")
            elif stem not in defined:
                bad.append(f"{name}:{n.lineno} {n.name}: its public {stem} is not defined in the same module")
    return bad


#: Modules whose cores are NumPy by definition (the draws' edge, test_package.EDGE_PREFIXES): no namespace.
NUMPY_EDGES = ("refattn.random",)


def core_xp_problems(source: str, name: str) -> list[str]:
    """Every top-level ``f_core`` takes the namespace as a required keyword-only ``xp`` (its checked ``f``
    resolved it): a core never looks the namespace up itself."""
    bad = []
    for n in ast.parse(source).body:
        if isinstance(n, ast.FunctionDef) and n.name.endswith("_core"):
            kw = {a.arg: d for a, d in zip(n.args.kwonlyargs, n.args.kw_defaults, strict=True)}
            if "xp" not in kw:
                positional = [a.arg for a in n.args.posonlyargs + n.args.args]
                where = "positional" if "xp" in positional else "absent"
                bad.append(f"{name}:{n.lineno} {n.name}: expected a keyword-only xp; it is {where}")
            elif kw["xp"] is not None:
                bad.append(f"{name}:{n.lineno} {n.name}: xp has a default (expected a required keyword)")
    return bad


#: The only checks a core may make: on its own result or its own allocation, which no caller can make for it.
CORE_OWN_CHECKS = {
    "check_normaliser": "the normaliser the core computed (linear attention, the Toeplitz RPE)",
    "check_nbytes": "the allocation bound of a buffer the core sizes (the token embedding's one-hot)",
}


def core_check_problems(source: str, name: str) -> list[str]:
    """No top-level ``f_core`` looks its namespace up or checks its arguments: a call of ``namespace``,
    ``array_namespace`` or a name starting with ``check``, ``_check`` or ``_validate`` in its body (its
    checked ``f`` does that), other than :data:`CORE_OWN_CHECKS`."""
    bad = []
    for n in ast.parse(source).body:
        if isinstance(n, ast.FunctionDef) and n.name.endswith("_core"):
            for c in ast.walk(n):
                if not isinstance(c, ast.Call):
                    continue
                f = c.func
                called = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""
                if called in CORE_OWN_CHECKS:
                    continue
                if called in ("namespace", "array_namespace") or called.startswith(("check", "_check",
                                                                                     "_validate")):
                    bad.append(f"{name}:{c.lineno} {n.name} calls {called} (checks belong to its public "
                               "function or to the caller that checked once)")
    return bad


def exported_core_problems(source: str, name: str, is_pkg: bool) -> list[str]:
    """``*_core`` names in ``__all__``, or imported by a package ``__init__`` (cores stay in their module)."""
    bad = []
    for node in ast.parse(source).body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "__all__" for t in node.targets):
            names = [e.value for e in getattr(node.value, "elts", []) if isinstance(e, ast.Constant)]
            bad += [f"{name}:{node.lineno} lists {n} in __all__" for n in names if str(n).endswith("_core")]
        if is_pkg and isinstance(node, ast.ImportFrom):
            bad += [f"{name}:{node.lineno} (a package __init__) imports {a.name}" for a in node.names
                    if (a.asname or a.name).endswith("_core")]
    return bad


@pytest.mark.parametrize("top", PACKAGES)
def test_no_private_name_crosses_a_module(top):
    bad = [b for m, p in ALL.items() if _under(m, top) for b in private_name_problems(p.read_text(), m,
                                                                                       _is_package(p))]
    assert not bad, (f"{top}: private names and modules used across modules (make the name public, e.g. "
                     "check_qk, or its core f_core):\n" + "\n".join(bad))


def test_every_core_has_its_public_function_beside_it():
    bad = [b for m, p in ALL.items() if _under(m, CORE) for b in core_problems(p.read_text(), m)]
    assert not bad, "cores without their public function in the same module:\n" + "\n".join(bad)


def test_every_core_takes_a_keyword_only_xp():
    bad = [b for m, p in ALL.items() if not any(_under(m, e) for e in NUMPY_EDGES)
           for b in core_xp_problems(p.read_text(), m)]
    assert not bad, "cores without a required keyword-only xp:\n" + "\n".join(bad)


def test_no_core_checks_its_arguments():
    bad = [b for m, p in ALL.items() if not any(_under(m, e) for e in NUMPY_EDGES)
           for b in core_check_problems(p.read_text(), m)]
    assert not bad, "cores that check or look up their namespace:\n" + "\n".join(bad)


def test_no_core_is_exported():
    bad = [b for m, p in ALL.items() for b in exported_core_problems(p.read_text(), m, _is_package(p))]
    assert not bad, "cores exported (import them from their module):\n" + "\n".join(bad)


@pytest.mark.parametrize(("module", "source", "want"), [
    ("refattn.nn.kinds.planted", "from refattn.attention.linear import _fwd_core\n",
     "private name _fwd_core"),
    ("refattn.attention.planted", "from .linear import _check_qk\n", "private name _check_qk"),
    ("refattn.nn.kinds.planted", "def f():\n    from ...attention.linear import _fwd_core\n",
     "planted:2 imports the private name"),
    ("refattn.nn.kinds.planted", "from refattn.attention import _causal\n",
     "private module refattn.attention._causal"),
    ("refattn.nn.kinds.planted", "from refattn.attention._causal import causal_fwd\n", "private module"),
    ("validation.planted", "import refattn._xp as x\n", "private module refattn._xp"),
    ("refattn.attention.planted", "from ..features import positive as _pos\ny = _pos._antithetic_grad\n",
     "reads the private name _antithetic_grad of refattn.features.positive"),
])
def test_planted_private_name_is_reported(module, source, want):
    assert any(want in b for b in private_name_problems(source, module, False)), \
        private_name_problems(source, module, False)


@pytest.mark.parametrize(("module", "source"), [
    ("refattn.attention.planted", "from . import _causal\nfrom ._causal import causal_fwd\n"),
    ("refattn.attention.planted", "from .linear import linear_attention_fwd_core\n"),
    ("refattn.features.planted", "from .._xp import namespace\n"),
    ("accel.planted", "from refattn._dispatch import register\n"),
    ("refattn.planted", "from refattn import __version__\n"),
])
def test_allowed_private_imports_are_not_reported(module, source):
    assert private_name_problems(source, module, False) == []


def test_planted_core_without_its_public_function_is_reported():
    assert core_problems("def g_core(x, *, xp):\n    return x\n", "m") != []
    assert core_problems("def _g_core(x, *, xp):\n    return x\n\n\ndef _g(x):\n    return x\n", "m") != []
    public_and_core = "def g(x):\n    return g_core(x, xp=None)\n\n\ndef g_core(x, *, xp):\n    return x\n"
    assert core_problems(public_and_core, "m") == []


@pytest.mark.parametrize(("source", "want"), [
    ("def g_core(x, cache):\n    return x\n", "it is absent"),
    ("def g_core(x, xp):\n    return x\n", "it is positional"),
    ("def g_core(x, *, xp=None):\n    return x\n", "xp has a default"),
])
def test_planted_core_without_a_keyword_only_xp_is_reported(source, want):
    assert any(want in b for b in core_xp_problems(source, "m")), core_xp_problems(source, "m")
    assert core_xp_problems("def g_core(x, *, scale=1.0, xp):\n    return x\n", "m") == []


@pytest.mark.parametrize(("source", "want"), [
    ("def g_core(x, *, xp):\n    xp = namespace(x)\n    return x\n", "calls namespace"),
    ("def g_core(x, *, xp):\n    check_shape('x', x, 'L')\n    return x\n", "calls check_shape"),
    ("def g_core(x, *, xp):\n    _check_struct(x)\n    return x\n", "calls _check_struct"),
    ("def g_core(x, *, xp):\n    checks.check_dy(x, x)\n    return x\n", "calls check_dy"),
])
def test_planted_core_that_checks_is_reported(source, want):
    assert any(want in b for b in core_check_problems(source, "m")), core_check_problems(source, "m")
    assert core_check_problems("def g_core(x, *, xp):\n    check_normaliser(x)\n    return x\n", "m") == []


def test_planted_exported_core_is_reported():
    assert exported_core_problems('__all__ = ["g", "g_core"]\n', "m", False)
    assert exported_core_problems("from .linear import g, g_core\n", "refattn.planted", True)
    assert not exported_core_problems("from .linear import g_core\n", "refattn.planted.mod", False)


@pytest.mark.parametrize(("top", "module", "source", "want"), [
    ("paper_checks", "paper_checks.registry", "from . import runner\n",
     "'registry' imports the higher layer 'runner'"),
    ("paper_checks", "paper_checks.scale", "from .__main__ import run_one\n", "'scale' imports the higher"),
    ("paper_checks", "paper_checks.experiments.images", "def f():\n    from ..horn import rpe\n",
     "'experiment drivers' imports the higher layer 'per-paper claims'"),
    ("paper_checks", "paper_checks.rules", "import paper_checks\n", "imports the higher layer 'CLI'"),
    ("paper_checks", "paper_checks.planted", "", "paper_checks.planted is in no layer"),
    ("validation", "validation.base", "from .checks.context import Context\n", "'base types' imports the"),
    ("validation", "validation.checks.values", "from ..crosscheck import registry\n",
     "'checks' imports the higher layer 'crosscheck adapters'"),
    ("validation", "validation.crosscheck.torch", "from ..runner import check\n", "higher layer 'runner'"),
])
def test_planted_layer_violation_is_reported(top, module, source, want):
    graph = {**_graph(top), module: imports_of(source, module, False)}
    assert any(want in b for b in layer_violations(graph, top, LAYERS[top])), \
        layer_violations(graph, top, LAYERS[top])


@pytest.mark.parametrize(("module", "source", "want"), [
    ("accel.planted", "from refattn.attention.linear import linear_attention\n", "accel may import only"),
    ("accel.planted", "import validation\n", "forbidden: accel -> validation"),
    ("validation.planted", "from paper_checks import registry\n",
     "forbidden: validation -> accel, paper_checks"),
    ("paper_checks.planted", "def f():\n    import accel\n", "forbidden: paper_checks -> accel"),
])
def test_planted_arrow_between_packages_is_reported(module, source, want):
    graph = {**_graph(), module: imports_of(source, module, False)}
    assert any(want in b for b in forbidden_arrows(graph)), forbidden_arrows(graph)


@pytest.mark.parametrize(("top", "a", "b"), [
    ("paper_checks", "paper_checks.registry", "paper_checks.scale"),
    ("validation", "validation.base", "validation.crosscheck.torch"),
    ("accel", "accel._checks", "accel.backends"),
])
def test_planted_cycle_outside_refattn_is_reported(top, a, b):
    graph = _graph(top)
    graph[a] = graph.get(a, []) + [(b, 1, False)]
    graph[b] = graph.get(b, []) + [(a, 1, False)]
    assert any(a in c and b in c for c in cycles(graph))


#: Largest module, in lines of code ("no source file above 550 lines"), counted with every
#: docstring removed (``ast``): the numpydoc docstrings roughly doubled the big feature modules
#: (positive.py: 1190 lines, 443 of code at the time), and a docstring is read beside its code, not instead.
MAX_CODE_LINES = 550
SOURCE_PACKAGES = ("refattn", "accel", "validation", "paper_checks")


@functools.cache
def _strip_tool():
    spec = importlib.util.spec_from_file_location("strip_docstrings",
                                                  ROOT / "docs" / "_tools" / "strip_docstrings.py")
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    return tool


def code_lines(src: str) -> int:
    """Lines of `src` with every module/class/function docstring removed (the clone count's normalisation,
    ``docs/_tools/strip_docstrings.py``)."""
    return len(_strip_tool().strip(src).splitlines())


def test_no_module_above_the_code_line_limit():
    sizes = {str(p.relative_to(ROOT)): code_lines(p.read_text())
             for pkg in SOURCE_PACKAGES for p in (ROOT / pkg).rglob("*.py")}
    big = {p: n for p, n in sizes.items() if n > MAX_CODE_LINES}
    assert not big, f"modules above {MAX_CODE_LINES} lines of code: {big}"


def test_code_line_count_ignores_docstrings_only():
    body = "\n".join(f"x{i} = {i}" for i in range(3))
    src = f'"""Module doc\n\nmore."""\n\n\ndef f():\n    """Doc."""\n    return 1\n\n\n{body}\n'
    assert code_lines(src) == 2 + 3                                   # def + return, three assignments
    assert code_lines(src.replace('    """Doc."""\n', "")) == 5
    assert code_lines(src + "y = 1\n") == 6                           # planted code line counts


#: Largest source file, in lines as ``wc -l`` counts them (newline characters), docstrings included: a file
#: over this holds two concepts (split off the second) or says something twice (say it once).
MAX_FILE_LINES = 700


def tracked_sources() -> list[str]:
    """Tracked ``.py`` files (``git ls-files``) under the source packages, relative to the repository root."""
    out = subprocess.run(["git", "ls-files", "--", *(f"{pkg}/*.py" for pkg in SOURCE_PACKAGES)],
                         cwd=ROOT, capture_output=True, text=True, check=True).stdout
    return out.split()


def file_line_problems(sources: dict[str, str]) -> list[str]:
    """``path: n lines`` for every source with more than ``MAX_FILE_LINES`` newlines (``wc -l``)."""
    counts = {path: src.count("\n") for path, src in sources.items()}
    return [f"{path}: {n} lines" for path, n in sorted(counts.items()) if n > MAX_FILE_LINES]


def test_no_source_file_over_the_line_limit():
    paths = tracked_sources()
    assert any(p.startswith("refattn/") for p in paths), "git ls-files found no refattn sources"
    problems = file_line_problems({p: (ROOT / p).read_text() for p in paths if (ROOT / p).is_file()})
    assert not problems, f"source files over {MAX_FILE_LINES} lines (wc -l): {problems}"


def test_file_line_count_is_wc_l():
    at_limit = "x = 1\n" * MAX_FILE_LINES
    assert file_line_problems({"ok.py": at_limit}) == []
    assert file_line_problems({"ok.py": at_limit + "y = 2"}) == []            # no final newline: wc -l 700
    assert file_line_problems({"big.py": at_limit + "y = 2\n"}) == [f"big.py: {MAX_FILE_LINES + 1} lines"]


#: Docstring lines at most half of a module's lines (``wc -l``): a method's derivation is said once (its
#: module or public function docstring, the others refer to it) and a block shared by several docstrings is a
#: ``refattn._docs.fill_doc`` constant, which is code.
MAX_DOCSTRING_SHARE = 0.5


def docstring_lines(src: str) -> int:
    """Lines inside module, class and function docstrings (the first statement when it is a string constant,
    found with ``ast.walk``); comments and other strings are not docstrings."""
    lines: set[int] = set()
    for node in ast.walk(ast.parse(src)):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if (isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant)
                    and isinstance(first.value.value, str)):
                lines.update(range(first.lineno, first.end_lineno + 1))
    return len(lines)


def docstring_share_problems(sources: dict[str, str]) -> list[str]:
    """``path: docstring/total = share`` for every source whose docstring lines exceed half its lines."""
    out = []
    for path, src in sorted(sources.items()):
        total, doc = len(src.splitlines()), docstring_lines(src)
        if total and doc > MAX_DOCSTRING_SHARE * total:
            out.append(f"{path}: {doc}/{total} = {doc / total:.1%}")
    return out


def test_no_refattn_module_is_mostly_docstring():
    sources = {str(p.relative_to(ROOT)): p.read_text() for p in (ROOT / "refattn").rglob("*.py")}
    problems = docstring_share_problems(sources)
    assert not problems, f"modules over {MAX_DOCSTRING_SHARE:.0%} docstring lines: {problems}"


def test_docstring_share_counts_docstrings_only():
    src = ('"""Module doc\n\nmore."""\n\n#: a comment\nBLOCK = """\nshared\nblock\n"""\n\n\n'
           'class A:\n    """Class doc."""\n\n    def f(self):\n        """Method\n        doc."""\n'
           '        return 1\n')
    assert docstring_lines(src) == 3 + 1 + 2               # module, class, method; comment and BLOCK not
    assert docstring_share_problems({"ok.py": src}) == []     # 6 of 18 lines
    long_doc = '"""Class\n    doc\n    that\n    runs\n    on\n    and\n    on."""'
    at_half = src.replace('"""Class doc."""', long_doc)
    assert docstring_lines(at_half) == 3 + 7 + 2
    assert docstring_share_problems({"half.py": at_half}) == []                  # 12 of 24: at the limit
    over = at_half.replace("        return 1\n", "")
    assert docstring_share_problems({"over.py": over}) == ["over.py: 12/23 = 52.2%"]
