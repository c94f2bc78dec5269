"""Configuration checking for the models (pure Python: no arrays).

Two plain, JSON-serialisable dicts describe a model: the attention configuration ``{"kind": ..., <options>,
"redraw_every": None | k}`` (:func:`check_attention_config`; the kinds and their options are declared in
:mod:`refattn.nn.kinds`) and the transformer configuration (:func:`check_config`). Both checks fill the
defaults and reject unknown keys, kinds and option values with the list of what is accepted; checkpoints store
the normalised dicts.
"""

from __future__ import annotations

from .._xp import check_choice, check_positive_int
from .kinds import ATTENTION_KINDS, COMMON_OPTIONS

__all__ = ["check_attention_config", "check_config", "check_class_token", "has_class_token", "READOUTS"]


def check_attention_config(attention, *, d_head=None, n_heads=None) -> dict:
    r"""Validate an attention configuration dict and return it with every default filled in.

    ``m`` defaults to ``2 * d_head`` for random-feature kinds when `d_head` is given; kind-specific defaults
    (S2's ``content_heads``) are filled by the kind's own ``check``.

    Parameters
    ----------
    attention : dict or str
        ``{"kind": ..., <options>, "redraw_every": None | k}`` or just a kind name (``"favor"``); the kinds
        and their options are listed in :mod:`refattn.nn.mha`.
    d_head : int, optional
        Head width d (fills the default ``m = 2 d``).
    n_heads : int, optional
        Number of heads H (for kinds whose defaults depend on it).

    Returns
    -------
    dict
        A new, JSON-serialisable dict: ``kind``, every option of the kind (defaults filled) and
        ``redraw_every``.

    Raises
    ------
    ValueError
        Naming the unknown kind (and the known ones), an unknown option (and the accepted ones) or a bad
        option value.

    Examples
    --------
    >>> from refattn.nn import check_attention_config
    >>> att = check_attention_config("favor", d_head=4)
    >>> att["m"], att["draw"], att["features"], att["redraw_every"]     # defaults filled in
    (8, 'orthogonal', 'positive', None)
    """
    if isinstance(attention, str):
        attention = {"kind": attention}
    if not isinstance(attention, dict) or "kind" not in attention:
        raise ValueError(f"attention: expected a dict with a 'kind' entry (or a kind name); "
                         f"got {attention!r}")
    kind = attention["kind"]
    if kind not in ATTENTION_KINDS:
        known = ", ".join(sorted(ATTENTION_KINDS))
        raise ValueError(f"attention kind: unknown kind {kind!r}; known kinds: {known}")
    spec = ATTENTION_KINDS[kind]
    allowed = {**spec.options, **COMMON_OPTIONS}
    unknown = sorted(set(attention) - set(allowed) - {"kind"})
    if unknown:
        raise ValueError(f"attention: unknown option(s) {unknown} for kind {kind!r}; "
                         f"accepted: {sorted(allowed)}")
    out = {"kind": kind, **allowed, **{k: v for k, v in attention.items() if k != "kind"}}
    for name, choices in spec.choices.items():
        check_choice(out[name], f"attention.{name}", choices)
    if "m" in out:
        if out["m"] is None and d_head is not None:
            out["m"] = 2 * int(d_head)
        if out["m"] is not None:
            out["m"] = check_positive_int(out["m"], "attention.m")
    for name in ("components", "lengthscales", "clip", "max_len", "r", "pos_dim", "order"):
        if name in out and out[name] is not None:
            out[name] = check_positive_int(out[name], f"attention.{name}")
    if out.get("grid") is not None:
        g = out["grid"]
        if not (isinstance(g, (tuple, list)) and len(g) == 2):
            raise ValueError(f"attention.grid: expected None (1-D positions) or a pair (H, W); got {g!r}")
        out["grid"] = [check_positive_int(g[0], "attention.grid[0]"),
                       check_positive_int(g[1], "attention.grid[1]")]
    if out.get("grid") is not None and out.get("pos_dim") not in (None, 2):
        raise ValueError(f"attention.pos_dim: a grid gives 2-D positions; got pos_dim = {out['pos_dim']}")
    if out["redraw_every"] is not None:
        out["redraw_every"] = check_positive_int(out["redraw_every"], "attention.redraw_every")
    if spec.check is not None:
        out = spec.check(out, d_head=d_head, n_heads=n_heads)
    return out


def check_class_token(kind: str, causal, L=None):
    """A class token's preconditions (:func:`refattn.nn.mha.mha_fwd`'s `class_token`): attention kind `kind`
    takes one, non-causal attention, and ``L >= 2`` tokens when `L` is given; a ``ValueError`` naming what
    fails."""
    if not ATTENTION_KINDS[kind].class_token:
        takes = ", ".join(sorted(n for n, k in ATTENTION_KINDS.items() if k.class_token))
        raise ValueError(f"class_token: attention kind {kind!r} does not define where a class token (a token "
                         f"without a position) sits; kinds that do: {takes}")
    if causal:
        raise ValueError("class_token: the class token is token 0, so under causal attention it would see "
                         "itself only; expected causal=False")
    if L is not None and L < 2:
        raise ValueError(f"x: a class token needs at least one other token, L >= 2; got L = {L}")


#: the classifier's readouts (refattn.nn.transformer): mean over the positions, position 0, a learned class
#: token prepended to the sequence
READOUTS = ("mean", "first", "class-token")

#: the query/key projections' initialisations (refattn.nn.init.init_mha)
QK_INITS = ("glorot", "torch")

_DEFAULTS = {
    "task": None, "input": "tokens", "vocab_size": None, "n_classes": None, "patch": None,
    "image_shape": None,
    "d_model": None, "n_heads": None, "n_layers": None, "d_ff": None, "max_len": None, "position": "sinusoid",
    "readout": "mean", "attention": "softmax", "causal": None, "dtype": "float64",
    "attn_dropout": 0.0, "resid_dropout": 0.0, "qk_init": "glorot",
}


def check_config(config: dict) -> dict:
    r"""Validate a transformer configuration; return a normalised copy (defaults filled, attention checked).

    Required: ``task`` ("classify" | "lm"), ``d_model``, ``n_heads`` (dividing ``d_model``), ``n_layers``,
    ``max_len``; ``vocab_size`` for token input and for ``lm``; ``n_classes`` for ``classify``; ``patch`` and
    ``image_shape = (H, W, C)`` for ``input="patches"``. Defaults: ``d_ff = 4 d_model``,
    ``position="sinusoid"``, ``readout="mean"`` (:data:`READOUTS`, below), ``attention="softmax"``,
    ``causal`` = (task == "lm"),
    ``dtype="float64"``, ``attn_dropout = resid_dropout = 0`` (dropout off; rates in [0, 1), applied only when
    the caller passes masks drawn by :func:`refattn.nn.init.draw_dropout_masks`), ``qk_init="glorot"`` (the
    query/key projections' initialisation, :func:`refattn.nn.init.init_mha`: ``"glorot"`` or ``"torch"``).

    The classifier's ``readout`` (``task="classify"``; the language model reads every position):

    * ``"mean"``: the mean of the final hidden states over the positions;
    * ``"first"``: the final hidden state at position 0 (an input token);
    * ``"class-token"``: a learned vector ``params["cls"]: (d_model,)``, initialised ``N(0, 1)`` as Horn et
      al.'s code does (``train.py`` l. 49, 59), is prepended to the embedded sequence (L + 1 positions;
      ``max_len`` bounds the L input tokens) **without a position**: no learned or sinusoid positional
      embedding is added to it, and the positional attention kinds place it as
      :mod:`refattn.nn.kinds.base` describes (S1 and FLT: zero positional features; S2: as Horn et al.'s
      code). Its final hidden state is read. Needs non-causal attention and a kind that takes a class token
      (not ``toeplitz``).

    Parameters
    ----------
    config : dict
        The model configuration (plain, JSON-serialisable), keys as above.

    Returns
    -------
    dict
        A new dict with every key, defaults filled and ``"attention"`` normalised by
        :func:`check_attention_config`.

    Raises
    ------
    TypeError
        `config` is not a dict.
    ValueError
        An unknown key, a missing required key or a bad value, naming the key.
    """
    if not isinstance(config, dict):
        raise TypeError(f"config: expected a dict; got {type(config).__name__}")
    unknown = sorted(set(config) - set(_DEFAULTS))
    if unknown:
        raise ValueError(f"config: unknown key(s) {unknown}; accepted: {sorted(_DEFAULTS)}")
    c = {**_DEFAULTS, **config}
    check_choice(c["task"], "config['task']", ("classify", "lm"))
    check_choice(c["input"], "config['input']", ("tokens", "patches"))
    check_choice(c["position"], "config['position']", ("sinusoid", "learned", "none"))
    check_choice(c["readout"], "config['readout']", READOUTS)
    check_choice(c["qk_init"], "config['qk_init']", QK_INITS)
    check_choice(c["dtype"], "config['dtype']", ("float64", "float32"))
    for key in ("attn_dropout", "resid_dropout"):
        rate = c[key]
        if isinstance(rate, bool) or not (isinstance(rate, (int, float)) and 0 <= rate < 1):
            raise ValueError(f"config['{key}']: expected a dropout probability in [0, 1); got {rate!r}")
        c[key] = float(rate)
    for key in ("d_model", "n_heads", "n_layers", "max_len"):
        if c[key] is None:
            raise ValueError(f"config['{key}']: required; got nothing")
        c[key] = check_positive_int(c[key], f"config['{key}']")
    if c["d_model"] % c["n_heads"]:
        raise ValueError(f"config['n_heads']: the number of heads {c['n_heads']} must divide d_model = "
                         f"{c['d_model']}")
    c["d_ff"] = check_positive_int(c["d_ff"] if c["d_ff"] is not None else 4 * c["d_model"], "config['d_ff']")
    if c["input"] == "tokens" or c["task"] == "lm":
        if c["vocab_size"] is None:
            raise ValueError("config['vocab_size']: required for token input and language modelling")
        c["vocab_size"] = check_positive_int(c["vocab_size"], "config['vocab_size']")
    if c["task"] == "lm":
        if c["input"] != "tokens":
            raise ValueError("config['input']: a language model takes tokens; got 'patches'")
        if c["causal"] is False:
            raise ValueError("config['causal']: a language model must be causal; got False")
        c["causal"] = True
    else:
        if c["n_classes"] is None:
            raise ValueError("config['n_classes']: required for task 'classify'")
        c["n_classes"] = check_positive_int(c["n_classes"], "config['n_classes']")
        c["causal"] = bool(c["causal"]) if c["causal"] is not None else False
    if c["input"] == "patches":
        c["patch"] = check_positive_int(c["patch"], "config['patch']")
        shape = c["image_shape"]
        if not (isinstance(shape, (list, tuple)) and len(shape) == 3):
            raise ValueError(f"config['image_shape']: expected (H, W, C); got {shape!r}")
        H, W, C = (check_positive_int(s, "config['image_shape']") for s in shape)
        if H % c["patch"] or W % c["patch"]:
            raise ValueError(f"config['patch']: expected a divisor of H = {H} and W = {W}; got {c['patch']}")
        c["image_shape"] = [H, W, C]
        n_tokens = (H // c["patch"]) * (W // c["patch"])
        if n_tokens > c["max_len"]:
            raise ValueError(f"config['max_len']: {c['max_len']} is below the number of patches {n_tokens}")
    att = check_attention_config(c["attention"], d_head=c["d_model"] // c["n_heads"], n_heads=c["n_heads"])
    if "max_len" in att:                     # kinds with a per-offset table (Toeplitz) size it from the model
        if att["max_len"] is None:
            att["max_len"] = c["max_len"]
        elif att["max_len"] != c["max_len"]:
            raise ValueError(f"config['attention']['max_len']: {att['max_len']} differs from "
                             f"config['max_len'] = {c['max_len']}")
    if att.get("grid") is not None and c["input"] == "patches":
        n_tokens = (c["image_shape"][0] // c["patch"]) * (c["image_shape"][1] // c["patch"])
        if att["grid"][0] * att["grid"][1] != n_tokens:
            raise ValueError(f"config['attention']['grid']: {att['grid']} does not match the patch grid "
                             f"({c['image_shape'][0] // c['patch']}, {c['image_shape'][1] // c['patch']}) "
                             f"with L = {n_tokens} positions")
    c["attention"] = att
    if has_class_token(c):
        try:
            check_class_token(att["kind"], c["causal"])
        except ValueError as exc:
            raise ValueError(f"config['readout']: 'class-token': {exc}") from None
    return c


def implied_param_count(cfg: dict) -> int:
    """A lower bound on the number of parameters `cfg` implies: embeddings, positions, the dense layers and
    layer norms of every block, and the head (the attention kinds' own parameters are not counted). Computed
    from the configuration alone, so a hostile size is caught before anything is allocated."""
    D, L, F = cfg["d_model"], cfg["n_layers"], cfg["d_ff"]
    if cfg["input"] == "tokens":
        n = cfg["vocab_size"] * D
    else:
        p = cfg["patch"]
        n = p * p * cfg["image_shape"][2] * D + D
    if cfg["position"] == "learned":
        n += cfg["max_len"] * D
    if has_class_token(cfg):
        n += D                                                                     # the class token
    n += L * (4 * (D * D + D) + 2 * D * F + F + D + 4 * D)
    n_out = cfg["n_classes"] if cfg["task"] == "classify" else cfg["vocab_size"]
    return n + 2 * D + D * n_out + n_out


def has_class_token(cfg) -> bool:
    """Whether the model of the normalised configuration `cfg` prepends a class token (token 0 of every
    block's input)."""
    return cfg["task"] == "classify" and cfg["readout"] == "class-token"
