"""`draft export`: any draft layout the loader reads, written in the speculators 0.9 layout.

The loader (program/checkpoint.py) reads speculators (0.9 and earlier), original EAGLE-3 and
SpecForge checkpoints exactly, or refuses them. Export writes what it read as speculators 0.9
(`Eagle3DraftModel`, `rope_parameters`, `speculators_config` naming the verifier), then reads
the written directory back and proves it is the same draft: every tensor bit-equal and the
draft forward on a fixed random input bit-equal. A draft that vLLM runs with the target's
embedding (no `embed_tokens`) gets the target's rows written in, so `--target` is needed then.
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

import torch

from eagle3_check.errors import InputError
from eagle3_check.program.checkpoint import load_draft
from eagle3_check.program.draft import Eagle3DraftHead
from eagle3_check.program.draft_config import speculators_block

PROBE_T = 5  # tokens in the round-trip forward probe
PROBE_SEED = 0


@dataclass
class DraftExport:
    source: str
    output: str
    verifier: str
    layers: int
    draft_vocab_size: int
    vocab_size: int
    aux_layer_ids: list[int] | None
    shared_embedding_written: bool
    tensors: int
    max_abs_diff: float  # of the probe forward, written vs read: 0.0 is the only passing value

    def to_json(self) -> dict:
        return dict(self.__dict__)

    def lines(self) -> list[str]:
        aux = self.aux_layer_ids if self.aux_layer_ids is not None else "vLLM default (unresolved: no --target)"
        return [f"draft export: {self.source} -> {self.output} (speculators 0.9 layout)",
                f"  verifier {self.verifier}; {self.layers} layer(s); draft vocab {self.draft_vocab_size} of "
                f"{self.vocab_size}; aux layers {aux}",
                f"  target embedding written in: {'yes' if self.shared_embedding_written else 'no'}",
                f"  round trip: {self.tensors} tensors bit-equal, probe forward max |diff| {self.max_abs_diff:g}"]


def _target_info(target_dir: Path | None) -> tuple[int | None, list[str], torch.Tensor | None]:
    """(target layer count, architectures, embedding weight [V, Ht]) of --target, or Nones."""
    if target_dir is None:
        return None, [], None
    from eagle3_check.program.target import load_hf_target

    model = load_hf_target(target_dir)
    cfg = model.config.get_text_config(decoder=True)
    return cfg.num_hidden_layers, list(model.config.architectures or []), model.get_input_embeddings().weight


def _verifier(head: Eagle3DraftHead, verifier: str | None, target: str | None, archs: list[str]) -> dict:
    """The speculators_config to write: its verifier from --verifier, else the source's, else --target."""
    block = head.cfg.extra.get("speculators_config")
    old = (block or {}).get("verifier", {}) if isinstance(block, dict) else {}
    name = verifier or old.get("name_or_path") or target
    if not name:
        raise InputError("draft export with no verifier", "the target this draft belongs to (speculators "
                         "loads a draft only with speculators_config.verifier.name_or_path)",
                         "pass --verifier ORG/NAME (the target's hub id) or --target DIR")
    if isinstance(block, dict) and not verifier:
        return {**block, "verifier": {**old, "name_or_path": name, "architectures": archs or old.get("architectures", [])}}
    return speculators_block(name, archs or old.get("architectures", []))


def probe(head: Eagle3DraftHead) -> torch.Tensor:  # -> [1, T, Vd] logits on a fixed random input
    g = torch.Generator().manual_seed(PROBE_SEED)
    tokens = torch.randint(0, head.cfg.vocab_size, (1, PROBE_T), generator=g)  # [1, T]
    hidden = torch.randn(1, PROBE_T, head.cfg.n_taps * head.cfg.target_hidden_size, generator=g)  # [1, T, n*Ht]
    with torch.no_grad():
        logits, _ = head(tokens, head.fuse(hidden), torch.arange(PROBE_T))
    return logits


def export_draft(source: str | Path, output: str | Path, target_dir: str | Path | None = None,
                 verifier: str | None = None, max_seq_len: int = 64) -> DraftExport:
    src, out = Path(source), Path(output)
    if out.resolve() == src.resolve():
        raise InputError(f"-o {out} is the source draft", "a different output directory",
                         "write to a new directory (the source stays untouched)")
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise InputError(f"-o {out} exists and is not an empty directory", "a new or empty directory",
                         "pick another -o, or remove the old export first")
    if not out.resolve().parent.is_dir():
        raise InputError(f"-o {out}: directory {out.resolve().parent} does not exist",
                         "an output directory inside an existing one", "create the parent directory first")
    head = load_draft(src, max_seq_len)
    n_layers, archs, embedding = _target_info(Path(target_dir) if target_dir else None)
    shared = head.needs_target_embedding
    if shared:
        if embedding is None:
            raise InputError(f"draft {src} has no embed_tokens (vLLM shares the target's)",
                             "the target, to write its embedding into the exported draft",
                             "pass --target DIR of the target this draft was trained for")
        head.share_embedding(embedding)
    if n_layers is not None:
        head.cfg.resolve_aux_layers(n_layers)
    head.cfg.extra = {**head.cfg.extra,
                      "speculators_config": _verifier(head, verifier, str(target_dir) if target_dir else None, archs)}
    tmp = out.parent / f".{out.name}.tmp-{os.getpid()}"  # written and proven here, then renamed into place
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        head.save(tmp)
        result = _prove(head, tmp, max_seq_len)
        os.replace(tmp, out)  # a directory rename: the export appears whole or not at all
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return DraftExport(str(src), str(out), result["verifier"], head.cfg.num_layers, head.cfg.draft_vocab_size,
                       head.cfg.vocab_size, head.cfg.aux_layer_ids, shared, result["tensors"], result["diff"])


def _prove(head: Eagle3DraftHead, out: Path, max_seq_len: int) -> dict:
    """Reads the written draft back: every tensor bit-equal and the probe forward bit-equal."""
    back = load_draft(out, max_seq_len)
    mine, theirs = head.weights(), back.weights()
    if mine.keys() != theirs.keys():
        raise InputError(f"draft export {out} read back with tensors {sorted(mine.keys() ^ theirs.keys())} differing",
                         "the same tensors as the source", "report this: the writer and the loader disagree")
    for name, t in mine.items():
        if t.dtype != theirs[name].dtype or not torch.equal(t, theirs[name]):
            raise InputError(f"draft export {out}: tensor {name} differs after the round trip",
                             "bit-equal tensors", "report this: the writer and the loader disagree")
    diff = (probe(head) - probe(back)).abs().max().item()
    if diff != 0.0:
        raise InputError(f"draft export {out}: probe forward differs by {diff:g} after the round trip",
                         "a bit-equal forward", "report this: the config written changes the math")
    written = json.loads((out / "config.json").read_text())
    return {"verifier": written["speculators_config"]["verifier"]["name_or_path"], "tensors": len(mine), "diff": diff}

