"""Reading an EAGLE-3 draft checkpoint: its files, its tensor names, every tensor consumed.

Files (the first that exists wins, as Transformers picks them): `model.safetensors`,
`model.safetensors.index.json` (sharded; every shard listed must exist and hold exactly the
tensors the index maps to it), `pytorch_model.bin` / `pytorch_model.bin.index.json` (read only
through `torch.load(weights_only=True)`: no pickled code runs).

Tensor names: the speculators layout is this module's own (`layers.N.*`, `fc.weight`,
`norm.weight`, `lm_head.weight`, `embed_tokens.weight`, `d2t`, `t2d`, `input_norm.weight`,
`fc_norm.N.weight`). The original EAGLE-3 / SpecForge layout names layer 0 `midlayer.*`
(renamed to `layers.0.*`, as vLLM and speculators' converter do).

Strict: every tensor of the checkpoint is loaded into the head or checked against it (t2d must
be the indicator of d2t's targets), except the training-only `verifier_norm.weight` and
`verifier_lm_head.weight` (speculators' frozen copies of the target's head; never used when
drafting). Any other tensor the head has no place for is an error that names it. Absent and
allowed: `embed_tokens.weight` (the draft shares the target's embedding, as vLLM does) and
`d2t`/`t2d` when the draft vocab is the whole target vocab.
"""

from __future__ import annotations

from pathlib import Path

import torch
from safetensors import safe_open

from eagle3_check.errors import InputError, first_line
from eagle3_check.program.draft import Eagle3DraftHead
from eagle3_check.program.draft_config import DraftConfig

WEIGHT_FILES = ("model.safetensors", "model.safetensors.index.json",
                "pytorch_model.bin", "pytorch_model.bin.index.json")
TRAINING_ONLY = {"verifier_norm.weight", "verifier_lm_head.weight"}


def _read_json(p: Path, what: str) -> dict:
    """A JSON object from a regular, size-bounded, strict UTF-8 JSON file (inputs.read_json)."""
    from eagle3_check.inputs import read_json

    data = read_json(p, what, "a JSON object", "re-save the draft or fix the file")
    if not isinstance(data, dict):
        raise InputError(f"{what} {p} holds a JSON {type(data).__name__}", "a JSON object",
                         "re-save the draft or fix the file")
    return data


def _read_file(p: Path) -> dict[str, torch.Tensor]:
    from eagle3_check.inputs import regular_file

    regular_file(p, "draft weight file", "copy the missing shard next to the index")  # FIFO, device: named
    try:
        if p.suffix == ".bin":
            out = torch.load(p, map_location="cpu", weights_only=True)
        else:
            with safe_open(str(p), framework="pt") as f:
                out = {k: f.get_tensor(k) for k in f.keys()}  # noqa: SIM118 (safe_open has no iter)
    except Exception as e:  # safetensors / torch raise their own types for corrupt files
        raise InputError(f"draft weights {p} cannot be read ({first_line(e)[:80]})",
                         "a complete safetensors file, or a .bin of plain tensors",
                         "re-save the draft head; the file is truncated or holds pickled objects") from None
    if not isinstance(out, dict) or not all(isinstance(v, torch.Tensor) for v in out.values()):
        raise InputError(f"draft weights {p} hold {type(out).__name__}", "a dict of tensors",
                         "save the draft's state_dict")
    return out


def read_tensors(draft_dir: Path) -> tuple[dict[str, torch.Tensor], Path]:
    """All tensors of the checkpoint in `draft_dir`, and the file (or index) they came from."""
    for name in WEIGHT_FILES:
        p = draft_dir / name
        if not p.exists():  # present but not a regular file (a FIFO): _read_file / _read_json name it
            continue
        if not name.endswith(".index.json"):
            return _read_file(p), p
        index = _read_json(p, "draft weight index")
        wmap = index.get("weight_map")
        if not isinstance(wmap, dict) or not wmap:
            raise InputError(f"draft weight index {p} has no weight_map", "a sharded-checkpoint index",
                             "re-save the draft with save_pretrained")
        tensors: dict[str, torch.Tensor] = {}
        for shard in sorted(set(wmap.values())):
            got = _read_file(draft_dir / shard)
            listed = {k for k, v in wmap.items() if v == shard}
            stray = sorted(got.keys() - listed) or sorted(listed - got.keys())
            if stray:
                raise InputError(f"draft shard {shard} and index {p.name} disagree on {stray[0]}",
                                 "each shard holding exactly the tensors the index maps to it",
                                 "re-save the draft; the index or a shard is stale")
            tensors.update(got)
        return tensors, p
    raise InputError(f"draft directory {draft_dir} has no weights",
                     f"one of {', '.join(WEIGHT_FILES)}", "pass --draft DIR of a saved EAGLE-3 draft")


def canonical_names(tensors: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Original EAGLE-3 / SpecForge names -> this head's (`midlayer.` is layer 0)."""
    out = {}
    for k, v in tensors.items():
        name = "layers.0." + k[len("midlayer."):] if k.startswith("midlayer.") else k
        if name in out:
            raise InputError(f"draft tensor {k} duplicates {name}", "one tensor per name",
                             "remove the duplicate from the checkpoint")
        out[name] = v
    return out


def _vocab_maps(head: Eagle3DraftHead, weights: dict, where: Path) -> None:
    cfg = head.cfg
    if "d2t" not in weights:
        if cfg.draft_vocab_size != cfg.vocab_size:
            raise InputError(f"draft weights {where} lack d2t",
                             f"d2t, since draft_vocab_size {cfg.draft_vocab_size} != vocab {cfg.vocab_size}",
                             "re-save the draft with its d2t/t2d vocabulary maps")
        if "t2d" in weights:
            raise InputError(f"draft weights {where} have t2d but no d2t", "both or neither",
                             "re-save the draft with both vocabulary maps")
        return  # full vocab: d2t stays all zero (identity), t2d all true (Vd == V)
    d2t = weights["d2t"]
    if d2t.dtype.is_floating_point or d2t.shape != (cfg.draft_vocab_size,):
        raise InputError(f"draft tensor d2t is {d2t.dtype} {list(d2t.shape)}",
                         f"integer [{cfg.draft_vocab_size}]", "rebuild d2t from the target vocabulary")
    target = d2t.long() + torch.arange(cfg.draft_vocab_size)
    if target.min() < 0 or target.max() >= cfg.vocab_size:
        bad = int(target.max() if target.max() >= cfg.vocab_size else target.min())
        raise InputError(f"draft d2t maps to target id {bad}", f"target ids in [0, {cfg.vocab_size})",
                         "rebuild d2t from the target vocabulary")
    head.d2t.copy_(d2t.long())
    head.t2d.zero_()
    head.t2d[target] = True
    if "t2d" in weights:
        t2d = weights["t2d"]
        if t2d.shape != (cfg.vocab_size,) or not torch.equal(t2d.bool(), head.t2d):
            raise InputError(f"draft tensor t2d ({list(t2d.shape)}) is not the set of d2t's target ids",
                             "t2d[i] true exactly for the ids d2t maps to",
                             "rebuild t2d from d2t (t2d = zeros(V).bool(); t2d[arange(Vd) + d2t] = True)")


def read_draft_config(draft_dir: str | Path) -> DraftConfig:
    """The draft's checked config.json (nothing allocated: the memory estimate reads it first)."""
    cfg_path = Path(draft_dir) / "config.json"
    if not cfg_path.exists():
        raise InputError(f"draft file {cfg_path} does not exist",
                         "a draft directory with config.json and its weights",
                         "pass --draft DIR pointing at a saved EAGLE-3 draft head")
    return DraftConfig.from_json(_read_json(cfg_path, "draft config"), str(cfg_path))


def load_draft(draft_dir: str | Path, max_seq_len: int) -> Eagle3DraftHead:
    d = Path(draft_dir)
    cfg_path = d / "config.json"
    cfg = read_draft_config(d)
    raw, where = read_tensors(d)
    weights = canonical_names(raw)
    head = Eagle3DraftHead(cfg, max_seq_len)
    params = {k: v for k, v in head.weights().items() if k not in ("d2t", "t2d")}
    for name in sorted(weights.keys() - params.keys() - {"d2t", "t2d"} - TRAINING_ONLY):
        raise InputError(f"draft tensor {name} in {where} has no place in the draft this config describes",
                         "only tensors the config's layers, norms and biases use",
                         "the config does not match the weights (layer count, biases, norms, q/k norm)")
    missing = sorted(params.keys() - weights.keys() - {"embed_tokens.weight"})
    if missing:
        raise InputError(f"draft weights {where} lack {missing[0]}"
                         + (f" (+{len(missing) - 1} more)" if len(missing) > 1 else ""),
                         f"every tensor the config {cfg_path.name} implies",
                         "the config does not match the weights, or the checkpoint is incomplete")
    for name, tensor in params.items():
        if name in weights and tuple(weights[name].shape) != tuple(tensor.shape):
            raise InputError(f"draft tensor {name} has shape {list(weights[name].shape)}",
                             f"shape {list(tensor.shape)} from {cfg_path}",
                             "make config.json match the saved weights")
        if name in weights and not weights[name].dtype.is_floating_point:
            raise InputError(f"draft tensor {name} is {weights[name].dtype}", "a floating-point tensor",
                             "dequantize the draft before loading it")
    head.load_state_dict({k: weights[k] for k in params if k in weights}, strict=False)
    head.needs_target_embedding = "embed_tokens.weight" not in weights
    _vocab_maps(head, weights, where)
    return head.eval()
