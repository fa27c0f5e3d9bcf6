#!/usr/bin/env python3
"""Builds the ONNX decoder test models in tests/llm/data/onnx-decoders with
the real exporter, onnxruntime-genai's model builder, from tiny seeded
random Hugging Face models (Qwen2 and Llama architectures, 2 layers, hidden
64, 4 query / 2 key-value heads, FFN 128) and a 400-token byte-level BPE
vocabulary trained here on /usr/share/common-licenses/GPL-3.

It needs torch, transformers 5.x and onnxruntime-genai, which the product
and its tests do not: run it in a scratch virtual environment, e.g.

    python3 -m venv /tmp/gen && /tmp/gen/bin/pip install torch \\
        transformers==5.25.0 onnxruntime-genai==0.18.0 onnx_ir onnx
    /tmp/gen/bin/python tools/gen_onnx_decoders.py tests/llm/data/onnx-decoders

The outputs are committed (each folder is what the builder wrote, minus
nothing); tests/llm/test_llm_onnx.py checks edgerun against onnxruntime on
them. Versions used for the committed files: torch 2.15.0, transformers
5.25.0, onnxruntime-genai 0.18.0, onnx 1.23.2.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM

CHATML = ("{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + "
          "'<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}")

# folder: architecture, tied embeddings, builder precision, extra options
VARIANTS = {
    "qwen2-int4": ("qwen2", False, "int4", []),
    "qwen2-int4-b64-asym": ("qwen2", False, "int4", ["block_size=64", "is_symmetric=false"]),
    "qwen2-int4-shared": ("qwen2", True, "int4", []),
    "qwen2-int8": ("qwen2", False, "int8", []),
    "qwen2-fp16": ("qwen2", False, "fp16", []),
    "llama-int4": ("llama", False, "int4", []),
}


def tokenizer(out):
    text = open("/usr/share/common-licenses/GPL-3").read().splitlines()
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    tok.train_from_iterator(text, trainers.BpeTrainer(vocab_size=400, special_tokens=specials,
                                                      initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    hf = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<|endoftext|>")
    hf.chat_template = CHATML
    hf.save_pretrained(out)
    return hf


def hf_model(arch, tied, out):
    hf = tokenizer(out)
    common = dict(vocab_size=len(hf), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                  num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256, rope_theta=10000.0,
                  rms_norm_eps=1e-6, tie_word_embeddings=tied, bos_token_id=None,
                  eos_token_id=hf.convert_tokens_to_ids("<|im_end|>"))
    cls = Qwen2ForCausalLM if arch == "qwen2" else LlamaForCausalLM
    cfg = Qwen2Config(**common) if arch == "qwen2" else LlamaConfig(**common)
    torch.manual_seed(7 if arch == "qwen2" else 11)
    m = cls(cfg)
    with torch.no_grad():
        for n, p in m.named_parameters():
            if "norm" in n:
                p.copy_(1.0 + 0.1 * torch.randn_like(p))
            elif "bias" in n:
                p.copy_(0.1 * torch.randn_like(p))
            else:
                p.copy_(torch.randn_like(p) / (p.shape[-1] ** 0.5))
    m.save_pretrained(out)


def main():
    dest = sys.argv[1]
    os.makedirs(dest, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        for name, (arch, tied, prec, extra) in VARIANTS.items():
            src = os.path.join(tmp, f"hf-{arch}-{int(tied)}")
            if not os.path.exists(src):
                hf_model(arch, tied, src)
            out = os.path.join(dest, name)
            shutil.rmtree(out, ignore_errors=True)
            cmd = [sys.executable, "-m", "onnxruntime_genai.models.builder", "-i", src, "-o", out, "-p", prec,
                   "-e", "cpu", "-c", os.path.join(tmp, "cache")]
            if extra:
                cmd += ["--extra_options"] + extra
            subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
            print(name, sum(os.path.getsize(os.path.join(out, f)) for f in os.listdir(out)), "bytes")


if __name__ == "__main__":
    main()
