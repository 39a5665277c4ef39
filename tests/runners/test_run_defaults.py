"""The run options a tokenizer and a target give (runners/defaults.py, runners/chat_template.py): ChatML
(SmolLM2's own template and config), a base model without a template (Gemma 3's post-processor
BOS), the Gemma 4 IT defaults for the repo's Gemma-4-id fixtures only, the role errors (each
message pinned), the sources in `run --json`, and the --target shape from the config.

The tokenizers are built here (a 512-id byte-level BPE around each model's control tokens), so
every test runs on a clean clone; the real SmolLM2 and Gemma 3 files are compared when present."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from tokenizers import Tokenizer as HFTokenizer
from tokenizers import decoders as hf_decoders
from tokenizers import models, pre_tokenizers, processors

from eagle3_check.errors import InputError, OptionError
from eagle3_check.runners.defaults import GEMMA4, check_roles, is_gemma4, resolve_options
from eagle3_check.runners.options import RunOptions, prompt_ids
from eagle3_check.tokenizer import Tokenizer

ROOT = Path(__file__).resolve().parents[2]
REAL = Path("/tmp/real")  # the lead's prototype conversions (tests/ compare against them when present)
# SmolLM2-135M-Instruct's chat_template.jinja, verbatim (test_the_template_is_smollm2s_own compares it)
SMOLLM2_TEMPLATE = (
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}{{ '<|im_start|>system\n"
    "You are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n' }}{% endif %}"
    "{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}")
SMOLLM2_PREFIX = ("<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face"
                  "<|im_end|>\n<|im_start|>user\n")
SMOLLM2_SUFFIX = "<|im_end|>\n<|im_start|>assistant\n"
CHATML = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]  # SmolLM2's ids 0, 1, 2
GEMMA3 = ["<pad>", "<eos>", "<bos>", "<unk>"]  # Gemma 3's ids 0..3


def build_tokenizer(root: Path, specials: list[str], config: dict, bos_processor: str | None = None,
                    template: str | None = None, n: int = 512) -> Path:
    """tokenizer.json (specials at ids 0.., the 256 byte pieces, fillers up to n ids), beside it
    tokenizer_config.json and, when given, chat_template.jinja. Returns the tokenizer.json path."""
    alphabet = sorted(pre_tokenizers.ByteLevel.alphabet())
    vocab = {t: i for i, t in enumerate(specials)}
    vocab |= {c: len(specials) + i for i, c in enumerate(alphabet)}
    vocab |= {f"zz{i}": i for i in range(len(vocab), n)}
    hf = HFTokenizer(models.BPE(vocab=vocab, merges=[]))
    hf.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    hf.decoder = hf_decoders.ByteLevel()
    hf.add_special_tokens(specials)
    if bos_processor:
        hf.post_processor = processors.TemplateProcessing(single=f"{bos_processor} $A",
                                                          special_tokens=[(bos_processor, vocab[bos_processor])])
    root.mkdir(parents=True, exist_ok=True)
    hf.save(str(root / "tokenizer.json"))
    (root / "tokenizer_config.json").write_text(json.dumps(config))
    if template is not None:
        (root / "chat_template.jinja").write_text(template)
    return root / "tokenizer.json"


def model_dir(root: Path, **generation) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "generation_config.json").write_text(json.dumps(generation))
    return root


@pytest.fixture
def smollm2(tmp_path) -> tuple[Tokenizer, Path]:
    tok = build_tokenizer(tmp_path / "tok", CHATML, {"bos_token": "<|im_start|>", "eos_token": "<|im_end|>"},
                          template=SMOLLM2_TEMPLATE)
    return Tokenizer.load(tok), model_dir(tmp_path / "target", bos_token_id=1, eos_token_id=2)


@pytest.fixture
def gemma3(tmp_path) -> tuple[Tokenizer, Path]:
    tok = build_tokenizer(tmp_path / "tok", GEMMA3, {"bos_token": "<bos>", "eos_token": "<eos>"}, bos_processor="<bos>")
    return Tokenizer.load(tok), model_dir(tmp_path / "target", bos_token_id=2, eos_token_id=1)


def test_chatml_from_smollm2s_own_files(smollm2):
    tok, target = smollm2
    r = resolve_options(tok, target, {})
    o = r.options
    assert (o.chat_prefix, o.chat_suffix) == (SMOLLM2_PREFIX, SMOLLM2_SUFFIX)
    assert (o.bos_id, o.eos_id, o.stop_ids, o.stop_token, o.raw) == (-1, 2, (), "<|im_end|>", False)
    assert r.sources == {"chat_prefix": "chat_template.jinja", "chat_suffix": "chat_template.jinja", "raw": "default",
                         "bos_id": "none: the chat template renders its own", "eos_id": "generation_config.json",
                         "stop_ids": "none", "stop_token": "chat_template.jinja: end of turn"}
    ids = prompt_ids(tok, "Hi", o)
    assert ids[0] == 1 and ids.count(1) == 3 and ids.count(2) == 2  # <|im_start|> x3, <|im_end|> x2, no BOS added


def test_a_base_model_without_a_template_gets_its_post_processors_bos(gemma3):
    tok, target = gemma3
    r = resolve_options(tok, target, {})
    o = r.options
    assert (o.chat_prefix, o.chat_suffix, o.bos_id, o.eos_id, o.stop_ids, o.stop_token) == ("", "", 2, 1, (), None)
    assert r.sources["bos_id"] == "tokenizer.json post-processor"
    assert r.sources["chat_prefix"] == "none: no chat template"
    assert prompt_ids(tok, "Hi", o) == [2, *tok.encode("Hi")]


def test_the_gemma4_fixtures_keep_the_seed_defaults():
    for name in ("tiny-llama", "tiny-gemma4", "tiny-llama-random"):
        tok = Tokenizer.load(ROOT / "fixtures" / name / "tokenizer.json")
        r = resolve_options(tok, ROOT / "fixtures" / name / "target", {"max_new_tokens": 48})
        assert is_gemma4(tok) and r.options == RunOptions(max_new_tokens=48), name
        assert set(r.sources.values()) == {GEMMA4}
        assert r.line() == "options: Gemma 4 IT defaults (the tokenizer is Gemma 4's)"


def test_a_gemma4_like_tokenizer_with_one_control_token_moved_is_not_gemma4(tmp_path):
    specials = [f"<unused{i}>" for i in range(107)]
    for i, name in {1: "<eos>", 2: "<bos>", 100: "<|channel>", 101: "<channel|>", 105: "<|turn>", 106: "<turn|>"}.items():
        specials[i] = name
    good = Tokenizer.load(build_tokenizer(tmp_path / "a", specials, {"eos_token": "<eos>"}, n=520))
    specials[105], specials[104] = specials[104], specials[105]
    moved = Tokenizer.load(build_tokenizer(tmp_path / "b", specials, {"eos_token": "<eos>"}, n=520))
    assert is_gemma4(good) and not is_gemma4(moved)
    assert resolve_options(moved, None, {}).options.chat_prefix == ""  # no template: the prompt as given


def test_flags_override_each_field_and_are_named(smollm2):
    tok, target = smollm2
    r = resolve_options(tok, target, {"raw": True, "bos_id": 1, "stop_ids": (0,)})
    o = r.options
    assert (o.raw, o.bos_id, o.stop_ids, o.eos_id, o.stop_token) == (True, 1, (0,), 2, None)
    assert r.sources["bos_id"] == "flag --bos-id" and r.sources["stop_ids"] == "flag --stop-ids"
    assert r.sources["stop_token"] == "none: --raw"


def test_a_raw_prompt_takes_the_tokenizers_own_bos_rule(smollm2, gemma3):
    assert resolve_options(smollm2[0], smollm2[1], {"raw": True}).options.bos_id == -1  # SmolLM2 adds none
    assert resolve_options(gemma3[0], gemma3[1], {"raw": True}).options.bos_id == 2


def test_add_bos_token_in_the_config_wins_over_the_post_processor(tmp_path):
    tok = build_tokenizer(tmp_path, GEMMA3, {"bos_token": "<bos>", "eos_token": "<eos>", "add_bos_token": False},
                          bos_processor="<bos>")
    r = resolve_options(Tokenizer.load(tok), None, {})
    assert (r.options.bos_id, r.sources["bos_id"]) == (-1, "none: tokenizer_config.json add_bos_token false")
    assert r.notes == ["tokenizer_config.json add_bos_token is false but tokenizer.json's post-processor adds "
                       "'<bos>' 2: no BOS (the config is followed; --bos-id 2 adds it)"]


def test_a_list_of_eos_ids_gives_eos_id_and_stop_ids(tmp_path, smollm2):
    target = model_dir(tmp_path / "t2", eos_token_id=[2, 0])
    r = resolve_options(smollm2[0], target, {})
    assert (r.options.eos_id, r.options.stop_ids) == (2, (0,))
    assert r.sources["stop_ids"] == "generation_config.json: the EOS ids after the first"


def test_chat_template_jinja_wins_over_the_configs_and_says_so(tmp_path):
    tok = build_tokenizer(tmp_path, CHATML, {"eos_token": "<|im_end|>", "chat_template": "{{ messages }}"},
                          template=SMOLLM2_TEMPLATE)
    r = resolve_options(Tokenizer.load(tok), None, {})
    assert r.options.chat_suffix == SMOLLM2_SUFFIX and r.sources["chat_suffix"] == "chat_template.jinja"
    assert r.notes == ["tokenizer_config.json holds another chat_template; chat_template.jinja is used "
                       "(as Transformers does)"]


def test_the_template_in_tokenizer_config_is_read_when_no_jinja_file(tmp_path):
    tok = build_tokenizer(tmp_path, CHATML, {"eos_token": "<|im_end|>", "chat_template": SMOLLM2_TEMPLATE})
    r = resolve_options(Tokenizer.load(tok), None, {})
    assert r.options.chat_suffix == SMOLLM2_SUFFIX and r.sources["chat_suffix"] == "tokenizer_config.json chat_template"
    assert r.options.eos_id == 2 and r.sources["eos_id"] == "tokenizer_config.json eos_token"


# template errors: one line each, the fix is to state the template by hand -----------------------

FIX = "Fix: pass --chat-prefix and --chat-suffix (the text before and after the user message), or --raw"


@pytest.mark.parametrize("template, what", [
    ("{{ messages[0]['content'] }}{{ messages[0]['content'] }}", "renders the user message 2 times"),
    ("<|im_start|>assistant\n", "renders the user message 0 times"),
    ("{{ raise_exception('only system messages') }}",
     "does not render one user message (TemplateError: only system messages)"),
    ("{% for m in messages %}", "does not render one user message (TemplateSyntaxError: Unexpected end of template."),
], ids=["twice", "never", "raises", "syntax-error"])
def test_a_template_that_does_not_split_is_a_one_line_error(tmp_path, template, what):
    tok = build_tokenizer(tmp_path, CHATML, {"eos_token": "<|im_end|>"}, template=template)
    with pytest.raises(InputError) as e:
        resolve_options(Tokenizer.load(tok), None, {})
    msg = str(e.value)
    assert msg.startswith(f"chat template {tmp_path / 'chat_template.jinja'} {what}") and msg.endswith(FIX)
    assert "\n" not in msg
    assert resolve_options(Tokenizer.load(tok), None, {"raw": True}).options.raw  # --raw never renders it


def test_named_templates_without_a_default_are_an_error(tmp_path):
    tok = build_tokenizer(tmp_path, CHATML, {"chat_template": [{"name": "tool_use", "template": "x"}]})
    with pytest.raises(InputError, match=r"chat_template lists templates \['tool_use'\] and none named 'default'"):
        resolve_options(Tokenizer.load(tok), None, {})


# role errors -----------------------------------------------------------------------------------

def _err(tok, target, given, allow=False) -> str:
    with pytest.raises(OptionError) as e:
        resolve_options(tok, target, given, allow_text_stops=allow)
    return str(e.value)


def test_a_bos_id_that_is_the_eos_token_is_refused(smollm2):
    tok, target = smollm2
    assert _err(tok, target, {"bos_id": 2}) == (
        f"--bos-id 2 names '<|im_end|>', the EOS token of tokenizer {tok.path}; expected a BOS token (this "
        "tokenizer's BOS is '<|im_start|>', id 1), or -1 for none. Fix: pass --bos-id -1, or the tokenizer's BOS id")


def test_a_bos_id_that_is_the_end_of_turn_token_is_refused(gemma3):
    tok, target = gemma3
    assert _err(tok, target, {"bos_id": 3, "stop_token": "<unk>"}).startswith(
        f"--bos-id 3 names '<unk>', the end-of-turn token of tokenizer {tok.path}; expected a BOS token (this "
        "tokenizer's BOS is '<bos>', id 2)")


@pytest.mark.parametrize("given, flag, tid, piece", [
    ({"stop_ids": (2, 36)}, "--stop-ids", 36, "B"),  # a byte piece (the seed's stop id 50 on SmolLM2 is 'B')
    ({"eos_id": 92}, "--eos-id", 92, "z"),
], ids=["stop-id-letter", "eos-id-letter"])
def test_stop_ids_that_are_text_are_refused_unless_allowed(smollm2, given, flag, tid, piece):
    tok, target = smollm2
    assert tok.id_to_token(tid) == piece
    assert _err(tok, target, given) == (
        f"{flag} {tid} names '{piece}', an ordinary text token of tokenizer {tok.path} (not one of its added tokens); "
        "expected stop ids that are control tokens (EOS, end of turn); this tokenizer's EOS: 2 '<|im_end|>'. "
        f"Fix: drop {tid} from {flag}, or pass --allow-text-stops to stop on that text")
    assert resolve_options(tok, target, given, allow_text_stops=True).options.stop_ids == given.get("stop_ids", ())


def test_the_seed_defaults_on_smollm2_would_be_refused_by_name(smollm2):
    """What `run` did before: bos 2 and stop ids 1,50,106 named as the defaults they were."""
    tok, target = smollm2
    opts = RunOptions(stop_token=None)
    with pytest.raises(OptionError) as e:
        check_roles(tok, opts, {"bos_id": GEMMA4}, (2,))
    assert str(e.value).startswith(f"the --bos-id default ({GEMMA4}) 2 names '<|im_end|>', the EOS token")
    with pytest.raises(OptionError) as e:
        check_roles(tok, RunOptions(bos_id=-1, stop_token=None), {"stop_ids": GEMMA4}, (2,))
    assert str(e.value) == (
        f"the --stop-ids default ({GEMMA4}) 50 names 'P', an ordinary text token of tokenizer {tok.path} (not one of "
        "its added tokens); expected stop ids that are control tokens (EOS, end of turn); this tokenizer's EOS: "
        "1 '<|im_start|>', 2 '<|im_end|>'. Fix: drop 50 from --stop-ids, or pass --allow-text-stops to stop on that text")


def test_a_multi_token_stop_token_is_a_note_from_a_flag_and_an_error_from_a_default(smollm2):
    tok, target = smollm2
    assert resolve_options(tok, target, {"stop_token": "<turn|>"}).options.stop_token == "<turn|>"  # stop_set notes it
    with pytest.raises(OptionError) as e:
        check_roles(tok, RunOptions(bos_id=-1, stop_ids=()), {"stop_token": GEMMA4})
    assert str(e.value) == (
        f"the --stop-token default ({GEMMA4}) '<turn|>' encodes to 7 tokens {tok.encode('<turn|>')} with tokenizer "
        f"{tok.path}; expected a stop token that is one token. Fix: pass --stop-token with this tokenizer's "
        "end-of-turn token, or --stop-token ''")


# the CLI: sources in the JSON, the --target shape from the config -----------------------------

def test_run_json_says_where_each_option_and_the_shape_came_from(tmp_path, capsys):
    """tiny-llama's weights with a ChatML tokenizer of its 512 ids: the template, EOS and stop come
    from the files, the shape from the config's max_position_embeddings 256 (the old fixed spec)."""
    from eagle3_check.cli import main

    fx = ROOT / "fixtures" / "tiny-llama"
    target = tmp_path / "target"
    shutil.copytree(fx / "target", target)
    (target / "generation_config.json").write_text(json.dumps({"bos_token_id": 1, "eos_token_id": 2}))
    tok = build_tokenizer(tmp_path / "tok", CHATML, {"bos_token": "<|im_start|>", "eos_token": "<|im_end|>"},
                          template=SMOLLM2_TEMPLATE)
    rc = main(["run", "--prompt", "Hi", "--max-new-tokens", "3", "--target", str(target), "--draft",
               str(fx / "draft"), "--tokenizer", str(tok), "--json"])
    out = json.loads(capsys.readouterr().out)
    assert rc == 0
    info = out["info"]
    assert info["run_options"]["sources"]["chat_prefix"] == "chat_template.jinja"
    assert info["run_options"]["sources"]["eos_id"] == "generation_config.json"
    shape = info["program_shape"]["sources"]
    assert (shape["min_prefill"], shape["max_prefill"]) == ("default 1", "max_seq_len - 128, at least half")
    assert shape["max_seq_len"].startswith("target config max_position_embeddings 256;")
    assert out["prompt_ids"][:2] == [1, *Tokenizer.load(tok).encode("system")[:1]]  # no BOS before <|im_start|>


def test_the_target_shape_is_bounded_by_memory(tmp_path):
    from eagle3_check.program.target_spec import target_spec
    from eagle3_check.resources import set_budget

    fx = ROOT / "fixtures" / "tiny-llama"
    target = tmp_path / "target"
    shutil.copytree(fx / "target", target)
    cfg = json.loads((target / "config.json").read_text())
    (target / "config.json").write_text(json.dumps({**cfg, "max_position_embeddings": 100000}))
    try:
        set_budget(0.02)  # 20 MiB: 1024 slots need about 21.8 MiB with the prefill's scores, 512 slots 7.4
        spec, shape = target_spec(target, fx / "draft", {}, "cpu", "float32")
    finally:
        set_budget(None)
    assert (spec.max_seq_len, spec.max_prefill) == (512, 384)
    assert shape["sources"]["max_seq_len"] == (
        "target config max_position_embeddings 100000, capped at 1024, halved to fit half of 0.02 GiB "
        "(the --max-memory budget); program + prefill about 0.00722 GiB")
    assert target_spec(target, fx / "draft", {}, "cpu", "float32")[0].max_seq_len == 1024  # the memory available
    spec, shape = target_spec(target, fx / "draft", {"max_seq_len": 600, "max_prefill": 560}, "cpu", "float32")
    assert (spec.max_seq_len, spec.max_prefill, shape["sources"]["max_prefill"]) == (600, 560, "flag --max-prefill")


# the real files, when the lead's conversions are on this machine --------------------------------

@pytest.mark.skipif(not (REAL / "smollm2" / "chat_template.jinja").is_file(), reason="no /tmp/real/smollm2 here")
def test_the_template_is_smollm2s_own():
    assert (REAL / "smollm2" / "chat_template.jinja").read_text() == SMOLLM2_TEMPLATE
    r = resolve_options(Tokenizer.load(REAL / "smollm2" / "tokenizer.json"), REAL / "smollm2" / "target", {})
    assert (r.options.chat_prefix, r.options.chat_suffix, r.options.bos_id, r.options.eos_id,
            r.options.stop_token) == (SMOLLM2_PREFIX, SMOLLM2_SUFFIX, -1, 2, "<|im_end|>")


@pytest.mark.skipif(not (REAL / "gemma3" / "tokenizer.json").is_file(), reason="no /tmp/real/gemma3 here")
def test_gemma3_base_gets_its_bos_and_eos_and_no_template():
    r = resolve_options(Tokenizer.load(REAL / "gemma3" / "tokenizer.json"), REAL / "gemma3" / "target", {})
    o = r.options
    assert (o.chat_prefix, o.chat_suffix, o.bos_id, o.eos_id, o.stop_ids, o.stop_token) == ("", "", 2, 1, (), None)
    assert (r.sources["bos_id"], r.sources["eos_id"]) == ("tokenizer.json post-processor", "generation_config.json")


def test_check_reports_the_sources_in_json_and_text(tmp_path, capsys):
    from eagle3_check.cli import main

    prompts = tmp_path / "p.json"
    prompts.write_text(json.dumps({"prompts": [{"id": "a", "text": "Hi there"}]}))
    args = ["check", "--fixture", "tiny-llama", "--prompts", str(prompts), "--max-new-tokens", "2", "--no-progress"]
    assert main([*args, "--json"]) == 0
    info = json.loads(capsys.readouterr().out)["info"]
    assert info["run_options"] == {"sources": dict.fromkeys(
        ("chat_prefix", "chat_suffix", "raw", "stop_ids", "stop_token", "bos_id", "eos_id"), GEMMA4), "notes": [],
        "summary": "options: Gemma 4 IT defaults (the tokenizer is Gemma 4's)"}
    assert main([*args, "--bos-id", "1"]) == 2  # bos 1 is tiny-llama's <eos>
    assert capsys.readouterr().err.startswith("error: --bos-id 1 names '<eos>', the EOS token of tokenizer ")
    assert main([*args, "--bos-id", "-1"]) == 0
    out = capsys.readouterr().out
    assert "options: chat prefix/suffix (Gemma 4 IT defaults); bos -1 (flag --bos-id); eos 1 (Gemma 4 IT defaults)" in out


def test_a_template_that_renders_its_bos_gets_it_once_and_its_end_of_turn_stops(tmp_path):
    """Gemma 3 IT's shape: `{{ bos_token }}` in the template, `<end_of_turn>` closing the user turn."""
    template = ("{{ bos_token }}{% for m in messages %}<start_of_turn>{{ m['role'] }}\n{{ m['content'] }}<end_of_turn>\n"
                "{% endfor %}{% if add_generation_prompt %}<start_of_turn>model\n{% endif %}")
    path = build_tokenizer(tmp_path / "tok", [*GEMMA3, "<start_of_turn>", "<end_of_turn>"],
                           {"bos_token": "<bos>", "eos_token": "<eos>"}, bos_processor="<bos>", template=template)
    tok = Tokenizer.load(path)
    r = resolve_options(tok, model_dir(tmp_path / "target", eos_token_id=[1, 5]), {})
    o = r.options
    assert (o.chat_prefix, o.chat_suffix) == ("<bos><start_of_turn>user\n", "<end_of_turn>\n<start_of_turn>model\n")
    assert (o.bos_id, o.eos_id, o.stop_ids, o.stop_token) == (-1, 1, (5,), "<end_of_turn>")
    ids = prompt_ids(tok, "Hi", o)
    assert ids[:2] == [2, 4] and ids.count(2) == 1  # <bos> once: the template's, none prepended
