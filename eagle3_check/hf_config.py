"""A target directory's config.json, read before Transformers sees it: never run code from it.

Transformers runs Python shipped inside a model directory when a config names it (`auto_map`)
and the caller trusts remote code; with `trust_remote_code` unset it asks on stdin ("run custom
code? [y/N]", printed on stdout, which breaks `--json`). The tool never runs such code:
- `read_target_config` refuses a config with `auto_map` anywhere (top level or a nested
  text/vision config) and a `model_type` Transformers does not know (only remote code could
  build it), with one line naming the file and the key;
- every Transformers load passes `TRUST_REMOTE_CODE` (False), so nothing prompts;
- the CLI never reads stdin (cli/__init__.main points it at an empty stream).
The config is read as a bounded regular file in strict JSON (inputs.read_json), so the memory
estimate (resources.py) reads the sizes before anything is allocated.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from eagle3_check.errors import InputError
from eagle3_check.inputs import read_json
from eagle3_check.preflight import check_model_dir

TRUST_REMOTE_CODE = False  # passed to every from_pretrained; never True
FIX_SAVE = "re-save the target with save_pretrained from a built-in Transformers model class"


def _auto_map_path(data: Any, path: str = "") -> str | None:
    """The key path of the first `auto_map` in the config ('auto_map', 'text_config.auto_map')."""
    if isinstance(data, dict):
        for key, value in data.items():
            here = f"{path}.{key}" if path else key
            if key == "auto_map":
                return here
            found = _auto_map_path(value, here)
            if found:
                return found
    return None


def read_target_config(target_dir: str | Path) -> dict:
    """The target's config.json as a dict, refused when loading it would need the directory's code."""
    p = Path(target_dir) / "config.json"
    check_model_dir(target_dir, "--target")
    data = read_json(p, "target config", "an HF model config (a JSON object)", FIX_SAVE)
    if not isinstance(data, dict):
        raise InputError(f"target config {p} holds a JSON {type(data).__name__}", "a JSON object", FIX_SAVE)
    where = _auto_map_path(data)
    if where:
        raise InputError(f"target config {p} has {where}: loading it would run Python code from the "
                         "model directory", "a config of a built-in Transformers model (no auto_map)",
                         "remove auto_map (the tool never runs remote code), or convert the model to a "
                         "built-in architecture")
    from transformers import CONFIG_MAPPING

    kind = data.get("model_type")
    if not isinstance(kind, str) or kind not in CONFIG_MAPPING:
        raise InputError(f"target config {p}: model_type = {kind!r}",
                         "a model_type Transformers ships (only remote code could build another)",
                         "use a model whose architecture is built into Transformers, or upgrade transformers")
    return data


def text_config(data: dict) -> dict:
    """The decoder's own config of a multimodal config (`text_config`), else the config itself."""
    inner = data.get("text_config")
    return inner if isinstance(inner, dict) else data


def check_loaded_tensors(info: dict, target_dir: str | Path) -> None:
    """Every tensor of the checkpoint has a place in the model config.json describes, and every
    parameter came from the checkpoint (`from_pretrained(..., output_loading_info=True)`'s report):
    Transformers drops an extra tensor and initialises a missing one at random, in silence, so a
    target of another shape than its config would load. Refused as the draft's are (checkpoint.py)."""
    unexpected = sorted(info.get("unexpected_keys") or ())
    if unexpected:
        more = f" (+{len(unexpected) - 1} more)" if len(unexpected) > 1 else ""
        raise InputError(f"target tensor {unexpected[0]}{more} in {target_dir} has no place in the model its "
                         "config.json describes", "only tensors the config's layers, norms and biases use",
                         "the config does not match the weights (layer count, biases, q/k norm, another model): "
                         "re-save the target with save_pretrained")
    missing = sorted(info.get("missing_keys") or ())
    if missing:
        more = f" (+{len(missing) - 1} more)" if len(missing) > 1 else ""
        raise InputError(f"target weights in {target_dir} lack {missing[0]}{more} (Transformers would initialise "
                         "it at random)", "every tensor config.json implies",
                         "the checkpoint is incomplete or for another config: re-save the target with save_pretrained")
