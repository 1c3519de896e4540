"""Horovod's knob values in data files (env.toml, model files, validation records, proposals), checked by its
knob table (:data:`autotuner.frameworks.horovod.knobs.KNOBS`)."""
from __future__ import annotations

from typing import Annotated, Any

from pydantic import AfterValidator, create_model

from ....schemas.core import Finite, _Schema
from ..knobs import KNOB_BY_FIELD, KNOB_BY_PARAM


def _knob_type(key: str) -> Any:
    k = KNOB_BY_PARAM.get(key) or KNOB_BY_FIELD[key]
    conv = k.from_flag if key in KNOB_BY_PARAM else k.check

    def checked(v: Any) -> Any:
        conv(v)  # KnobError is a ValueError: pydantic reports it at this field
        return v
    return Annotated[bool if k.is_switch else Finite, AfterValidator(checked)]


#: knob keys accepted in data files: option names in flag units (``fusion_threshold_mb``) and
#: internal field names (``fusion_threshold_bytes``), as :func:`autotuner.frameworks.horovod.knobs.config_from_values`
KNOB_KEYS = tuple(sorted(set(KNOB_BY_PARAM) | set(KNOB_BY_FIELD)))
#: a knob object (unknown keys fail); values checked by their knob
Knobs = create_model("Knobs", __base__=_Schema, __doc__="Knob values by option or field name.",
                     **{key: (_knob_type(key), None) for key in KNOB_KEYS})
