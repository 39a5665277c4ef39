"""The GPU benchmark's targets and programs (bench/gpu_bench.py): the random Llama with a permutation-bigram greedy path
(`permutation_bigram_init`), its EAGLE-3 draft config and the program around them, and the real
mode's target, trained draft and chat-framed prompts from disk. Bench-only.
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from eagle3_check.fixtures.registry import ProgramSpec  # noqa: E402
from eagle3_check.program.draft import DraftConfig  # noqa: E402
from eagle3_check.program.eager import EagerBackend  # noqa: E402
from eagle3_check.program.speculator import Eagle3Speculator  # noqa: E402
from eagle3_check.program.target import TargetAdapter  # noqa: E402


def build_target(args, dev):
    from transformers import LlamaConfig, LlamaForCausalLM

    cfg = LlamaConfig(
        vocab_size=args.vocab, hidden_size=args.hidden, intermediate_size=args.intermediate,
        num_hidden_layers=args.layers, num_attention_heads=args.heads, num_key_value_heads=args.kv_heads,
        max_position_embeddings=4096, rms_norm_eps=1e-5, tie_word_embeddings=False,
        bos_token_id=None, eos_token_id=None, pad_token_id=0,
    )
    torch.manual_seed(0)
    with torch.device(dev):
        model = LlamaForCausalLM(cfg).eval()
    permutation_bigram_init(model, args.layers)
    model = model.to(torch.bfloat16)
    model.generation_config.eos_token_id = None
    model.generation_config.pad_token_id = 0
    n = args.layers
    dcfg = DraftConfig(
        hidden_size=args.hidden, num_attention_heads=args.heads, num_key_value_heads=args.kv_heads,
        intermediate_size=args.intermediate, vocab_size=args.vocab, draft_vocab_size=args.vocab,
        aux_layer_ids=[2, n // 2, n - 3], target_hidden_size=args.hidden,
    )
    max_seq = 1 << (args.prompt_len + args.new + 16).bit_length()
    return model, dcfg, max_seq


def real_prompts(args, tok) -> list[list[int]]:
    """The real mode's prompts: the prompt set's texts in the chat frame, encoded as the runner does."""
    from eagle3_check.fixtures.registry import load_prompts

    out = []
    for q in load_prompts(args.prompts)[: 1 + args.card_prompts]:
        ids = tok.encode(args.chat_prefix + q.text + args.chat_suffix)
        out.append(ids if args.bos_id == -1 else [args.bos_id, *ids])
    return out


def build_real(args, dev):
    """The real mode: the target and its trained draft from disk (bf16), as `check` builds them."""
    from eagle3_check.program.checkpoint import read_draft_config
    from eagle3_check.tokenizer import Tokenizer

    # with_eos(()): no tokenizer EOS either; an empty get_eos_ids falls back to it (DESIGN §2 rule 2),
    # which stopped the second run's spec rows at the answer's <|im_end|> while HF ran on
    tok = Tokenizer.load(args.tokenizer).with_eos(())
    prompts = real_prompts(args, tok)
    longest = max(len(q) for q in prompts)
    max_seq = 1 << (longest + args.new + 16).bit_length()
    spec = ProgramSpec(max_seq_len=max_seq, min_prefill=1, max_prefill=longest, chain_len=4,
                       min_verify_len=2, max_verify_len=8)
    # no stop set (the program's get_eos_ids and the tokenizer's EOS, above): every row emits --new
    # tokens, as HF generate's min_new_tokens makes it
    plain = EagerBackend.from_dirs(args.target, args.draft_dir, spec, str(dev), "bfloat16")
    plain._metadata["get_eos_ids"] = []
    model = plain.module.target.model
    model.generation_config.eos_token_id = None
    model.generation_config.pad_token_id = 0
    return plain, model, read_draft_config(args.draft_dir), max_seq, tok, prompts


def build_program(model, dcfg, max_seq, head, args, dev):
    spec = ProgramSpec(max_seq_len=max_seq, min_prefill=1, max_prefill=args.prompt_len, chain_len=4,
                       min_verify_len=2, max_verify_len=8)
    module = Eagle3Speculator(TargetAdapter(model, dcfg.aux_layer_ids, max_seq), head)
    module = module.to(device=dev, dtype=torch.bfloat16).eval()
    return EagerBackend(module, spec)


@torch.no_grad()
def permutation_bigram_init(model, n_layers: int) -> None:
    """Random weights with a robust greedy path. With the default init (std 0.02 everywhere)
    the top-1/top-2 logit margins of a random model are so small that a K+1-row verify and a
    one-row decode round differently in bf16 within ~10 tokens, and no acceptance can be
    controlled. Here the embedding is N(0, 1), lm_head rows are the embedding rows permuted
    (lm_head[perm[x]] = embed[x], so the greedy next token of x is perm[x] by a margin of
    ~H / rms), and the residual projections (o_proj, down_proj) use the GPT-2 scaled init
    std 0.02 / sqrt(2 L). All weights stay random; the arithmetic per token is unchanged."""
    embed = model.model.embed_tokens.weight
    embed.normal_(0.0, 1.0)
    gen = torch.Generator().manual_seed(0)
    perm = torch.randperm(embed.shape[0], generator=gen).to(embed.device)
    model.lm_head.weight.index_copy_(0, perm, embed)
    for layer in model.model.layers:
        layer.self_attn.o_proj.weight.normal_(0.0, 0.02 / (2 * n_layers) ** 0.5)
        layer.mlp.down_proj.weight.normal_(0.0, 0.02 / (2 * n_layers) ** 0.5)
