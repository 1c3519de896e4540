"""Load gradient layouts: shipped names, JSON files, or ``package.module:factory``.

Two entry points, by who names the layout:

- :func:`load_layout` for the command line's ``--model`` (a shipped name, a JSON path, or
  ``pkg.mod:factory``, which imports and calls user code: only an explicit option may do that);
- :func:`load_data_layout` for a layout named inside a data file (env.toml, a model JSON): a
  shipped name or a ``.json`` file under that file's folder, never code;
- :func:`load_recorded_layout` for the layout a validation or tune record names (``setup.model``, as
  ``validate --model`` was given): what :func:`load_data_layout` reads, and an absolute ``.json`` path.

Layout JSON files are checked by :class:`autotuner.schemas.LayoutFile`. Raises
:class:`autotuner.model.layout.LayoutError` with a one-line message for unknown names,
unreadable or malformed files, and factories that cannot be imported.
"""
from __future__ import annotations

import importlib
import json
import re
from importlib import resources
from pathlib import Path

from ..model.layout import Layout, LayoutError
from ..schemas import LAYOUT_SCHEMA, LayoutFile, LayoutRef, check
from .files import read_json

__all__ = ["LAYOUT_SCHEMA", "build_module", "layout_from_dict", "load_data_layout", "load_layout", "load_recorded_layout",
           "shipped_models"]

#: ``pkg.mod:factory``: a dotted module path and an attribute name, both Python identifiers
_FACTORY = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*:[A-Za-z_]\w*")


def shipped_models() -> list[str]:
    """Names of the layouts shipped in ``autotuner/layouts/*.json``."""
    root = resources.files("autotuner.layouts")
    return sorted(p.name[:-5] for p in root.iterdir() if p.name.endswith(".json"))


def layout_from_dict(d: dict, where: str = "<dict>") -> Layout:
    """Build a :class:`Layout` from a parsed ``autotuner.layout/1`` JSON object
    (:class:`autotuner.schemas.LayoutFile`). Raises LayoutError ``where: field: value: reason``."""
    check(LayoutFile, d, where, LayoutError)
    try:
        tensors = d["tensors"]
        return Layout(
            name=str(d.get("name", where)),
            names=tuple(str(t["name"]) for t in tensors),
            shapes=tuple(tuple(int(x) for x in t["shape"]) for t in tensors),
            dtypes=tuple(str(t.get("dtype", "float32")) for t in tensors),
            compute_share=tuple(float(t.get("compute_share", 0.0)) for t in tensors),
            # measured by `autotuner profile` (LayoutFile: ready_ms counts only with backward_ms)
            forward_ms=None if d.get("forward_ms") is None else float(d["forward_ms"]),
            backward_ms=None if d.get("backward_ms") is None else float(d["backward_ms"]),
            ready_ms=(tuple(float(t["ready_ms"]) for t in tensors)
                      if d.get("backward_ms") is not None and tensors[0].get("ready_ms") is not None else None),
            device=None if d.get("device") is None else str(d["device"]),
            batch_size=None if d.get("batch_size") is None else int(d["batch_size"]),
        )
    except (KeyError, TypeError, ValueError) as e:
        if isinstance(e, LayoutError):
            raise
        raise LayoutError(f"{where}: not a layout file ({type(e).__name__}: {e})") from None


def _backward_params(module) -> list:
    """``(name, parameter)`` of a ``torch.nn.Module`` in the order autograd accumulates them.

    Layers in reverse of registration order (registration order stands in for forward
    order). Within a layer, the order measured for float32 on an H100 and on this machine's
    CPU (``runs/gpu-profiles/``, ``tests/test_layout_factory.py``): ``torch.nn.Linear`` (addmm)
    accumulates bias before weight, which reverse registration order already gives;
    convolutions and normalization layers (``_ConvNd``, ``_NormBase``, ``LayerNorm``,
    ``GroupNorm``) accumulate weight before bias.
    """
    import torch.nn as nn

    weight_first = (nn.modules.conv._ConvNd, nn.modules.batchnorm._NormBase, nn.LayerNorm, nn.GroupNorm)
    # a parameter shared by several modules (tied weights) counts once, under its first name,
    # as in named_parameters()
    first_name = {id(p): n for n, p in module.named_parameters()}
    out = []
    for prefix, mod in reversed(list(module.named_modules())):
        own = [(name, p) for n, p in mod.named_parameters(recurse=False)
               if p.requires_grad and first_name.get(id(p)) == (name := f"{prefix}.{n}" if prefix else n)]
        own.reverse()
        if isinstance(mod, weight_first):
            own.sort(key=lambda np_: not np_[0].endswith(".weight") and np_[0] != "weight")
        out.extend(own)
    return out


def build_module(spec: str):
    """Import ``pkg.mod:factory`` and call it: (factory name, the ``torch.nn.Module`` it returns).

    Raises LayoutError (one line) for a malformed spec, an import that fails, a factory that is
    not callable, raises, or returns something that is not a ``torch.nn.Module``.
    """
    if not _FACTORY.fullmatch(spec):
        raise LayoutError(f"--model {spec!r}: not pkg.mod:factory (a dotted module path, ':', a function name)")
    mod_name, _, attr = spec.partition(":")
    try:
        factory = getattr(importlib.import_module(mod_name), attr)
    except (ImportError, AttributeError, ValueError, TypeError) as e:
        raise LayoutError(f"cannot import model factory {spec!r}: {e}") from None
    if not callable(factory):
        raise LayoutError(f"model factory {spec!r} is not callable")
    try:
        module = factory()
    except Exception as e:  # user code: report, do not trace back
        raise LayoutError(f"model factory {spec!r} failed: {type(e).__name__}: {e}") from None
    try:
        import torch.nn as nn
    except ImportError as e:
        raise LayoutError(f"model factory {spec!r}: needs torch ({e})") from None
    if not isinstance(module, nn.Module):
        raise LayoutError(f"model factory {spec!r} returned a {type(module).__name__}, not a torch.nn.Module")
    return attr, module


def _from_module(spec: str) -> Layout:
    attr, module = build_module(spec)
    try:
        params = _backward_params(module)
    except Exception as e:  # user code: report, do not trace back
        raise LayoutError(f"model factory {spec!r} failed: {type(e).__name__}: {e}") from None
    if not params:
        raise LayoutError(f"model factory {spec!r} returned a module without trainable parameters")
    # Compute share proxy: proportional to parameter count (no FLOP count without an input shape).
    total = sum(p.numel() for _, p in params)
    return Layout(
        name=attr,
        names=tuple(n for n, _ in params),
        shapes=tuple(tuple(p.shape) for _, p in params),
        dtypes=tuple(str(p.dtype).replace("torch.", "") for _, p in params),
        compute_share=tuple(p.numel() / total for _, p in params),
    )


def load_layout(spec: str) -> Layout:
    """Load a layout from a shipped name (``vgg16``), a JSON path, or ``pkg.mod:factory``.

    ``pkg.mod:factory`` calls ``factory()`` and introspects the returned ``torch.nn.Module``'s
    parameters (torch is needed only then) in backward order (:func:`_backward_params`);
    compute shares are then proportional to parameter counts, an approximation documented in
    docs/explanation/horovod-simulator.md.
    """
    if spec in shipped_models():
        return _shipped(spec)
    p = Path(spec)
    if spec.endswith(".json") or p.exists():
        return _read_file(p, spec)
    if ":" in spec:
        return _from_module(spec)
    raise LayoutError(f"unknown model {spec!r}; known: {', '.join(shipped_models())} "
                      "(or a layout .json path, or package.module:factory)")


def _shipped(name: str) -> Layout:
    text = resources.files("autotuner.layouts").joinpath(name + ".json").read_text(encoding="utf-8")
    return layout_from_dict(json.loads(text), name)


def _read_file(p: Path, where: str) -> Layout:
    """A layout JSON file; LayoutError for a missing, unreadable, non-UTF-8 or malformed file."""
    d = read_json(p, LayoutError, f"layout file {where}")
    return layout_from_dict(d, where)


def load_data_layout(ref: str, base: Path, where: str) -> Layout:
    """The layout a data file names (env.toml's ``layout``, a model JSON's workload ``layout``).

    ``ref`` is a shipped layout name, or a relative ``.json`` path resolved under ``base`` (the
    data file's folder; the resolved file must stay inside it, symbolic links included). Never
    imports code: ``module:factory`` is refused. ``where`` names the data file and field for
    errors. Raises LayoutError (one line).
    """
    check(LayoutRef, ref, where, LayoutError)
    if ref in shipped_models():
        return _shipped(ref)
    if not ref.endswith(".json"):
        raise LayoutError(f"{where}: {ref!r}: unknown layout; shipped: {', '.join(shipped_models())} "
                          f"(or a .json file under {base})")
    f = base / ref
    try:
        inside = f.resolve().is_relative_to(base.resolve())
    except (OSError, RuntimeError):
        inside = False
    if not inside:
        raise LayoutError(f"{where}: {ref!r}: resolves outside {base}")
    return _read_file(f, str(f))


def load_recorded_layout(ref: str, base: Path, where: str) -> Layout:
    """The layout a trial record names (``setup.model`` of a validation or tune record, written as the user
    gave ``--model``): a shipped name or a relative ``.json`` path under ``base`` (the environment's folder),
    as :func:`load_data_layout`, or an absolute ``.json`` path (``validate --model /abs/layout.json``:
    ``validate`` accepts it and records it so), read where it names. Never imports code. ``where``
    names the record file and field for errors. Raises LayoutError (one line), e.g. for a recorded file
    that is no longer there."""
    if isinstance(ref, str) and ref.endswith(".json") and ref.startswith("/") and "\0" not in ref:
        f = Path(ref)
        if not f.is_file():
            raise LayoutError(f"{where}: {ref!r}: no such layout file (the trials were recorded with "
                              "--model naming it by this absolute path; put the file back there)")
        return _read_file(f, ref)
    return load_data_layout(ref, base, where)

