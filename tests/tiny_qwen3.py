"""Write a random-weight tiny Qwen3 model as a GGUF file, without torch and without a hub.

The file has the shape of Qwen/Qwen3-0.6B in miniature (the ``qwen3`` architecture with q/k norms,
grouped-query attention, a byte-level BPE tokenizer with ChatML special tokens and Qwen3's own chat
template), so ``openvino_genai.LLMPipeline`` loads it exactly as it loads the real model's GGUF:
chat template, greedy decoding, streaming and batches all run in well under a second. The weights
are random, so the text it generates is gibberish: tests assert on behaviour, never on wording.

Usage: ``write_tiny_qwen3(Path("tiny.gguf"))`` (about 0.1 s); ``python tests/tiny_qwen3.py OUT.gguf``.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

#: Qwen3's chat template as published with Qwen/Qwen3-0.6B: with ``enable_thinking`` false the
#: generation prompt ends in an empty ``<think>\n\n</think>\n\n`` block, so the model answers directly.
QWEN3_CHAT_TEMPLATE = """{%- if tools %}
    {{- '<|im_start|>system\\n' }}
    {%- if messages[0].role == 'system' %}
        {{- messages[0].content + '\\n\\n' }}
    {%- endif %}
    {{- "# Tools\\n\\nYou may call one or more functions to assist with the user query.\\n\\n\
You are provided with function signatures within <tools></tools> XML tags:\\n<tools>" }}
    {%- for tool in tools %}
        {{- "\\n" }}
        {{- tool | tojson }}
    {%- endfor %}
    {{- "\\n</tools>\\n\\nFor each function call, return a json object with function name and arguments within \
<tool_call></tool_call> XML tags:\\n<tool_call>\\n{\\"name\\": <function-name>, \\"arguments\\": \
<args-json-object>}\\n</tool_call><|im_end|>\\n" }}
{%- else %}
    {%- if messages[0].role == 'system' %}
        {{- '<|im_start|>system\\n' + messages[0].content + '<|im_end|>\\n' }}
    {%- endif %}
{%- endif %}
{%- set ns = namespace(multi_step_tool=true, last_query_index=messages|length - 1) %}
{%- for message in messages[::-1] %}
    {%- set index = (messages|length - 1) - loop.index0 %}
    {%- if ns.multi_step_tool and message.role == "user" and message.content is string and \
not(message.content.startswith('<tool_response>') and message.content.endswith('</tool_response>')) %}
        {%- set ns.multi_step_tool = false %}
        {%- set ns.last_query_index = index %}
    {%- endif %}
{%- endfor %}
{%- for message in messages %}
    {%- if message.content is string %}
        {%- set content = message.content %}
    {%- else %}
        {%- set content = '' %}
    {%- endif %}
    {%- if (message.role == "user") or (message.role == "system" and not loop.first) %}
        {{- '<|im_start|>' + message.role + '\\n' + content + '<|im_end|>' + '\\n' }}
    {%- elif message.role == "assistant" %}
        {{- '<|im_start|>' + message.role + '\\n' + content + '<|im_end|>\\n' }}
    {%- elif message.role == "tool" %}
        {{- '<|im_start|>user\\n<tool_response>\\n' + content + '\\n</tool_response><|im_end|>\\n' }}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|im_start|>assistant\\n' }}
    {%- if enable_thinking is defined and enable_thinking is false %}
        {{- '<think>\\n\\n</think>\\n\\n' }}
    {%- endif %}
{%- endif %}"""

#: ChatML control tokens, as in Qwen3 (``<|endoftext|>`` pads, ``<|im_end|>`` ends a turn).
SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
#: Qwen3's reasoning markers: ordinary (user-defined) tokens, so they survive decoding as in the real model.
THINK_TOKENS = ["<think>", "</think>"]

#: The text the byte-level BPE is trained on (fixed, so the vocabulary is the same in every run).
TRAINING_TEXT = """
The engine schedules requests. Send a POST request to /v1/load_lora_adapter to load a LoRA adapter.
def load_lora_adapter(name: str, path: str) -> dict[str, str]:
    return {"name": name, "path": path}
class SamplingParams: temperature, top_p, max_tokens; the scheduler batches prompts on the GPU.
Answer the question from the sources. Cite them as [docs/lora.md:0-120]. Installation: pip install vllm.
The context does not contain the answer. What is vLLM? How do I enable prefix caching? café ☕ naïve
"""

HIDDEN = 64
BLOCKS = 2
HEADS = 4
KV_HEADS = 2
HEAD_DIM = 16
FFN = 128
VOCAB_SIZE = 384
CONTEXT = 4096


def _tokenizer() -> tuple[list[str], list[int], list[str]]:
    """Train the byte-level BPE; return tokens (by id), their GGUF types and the merges."""
    import json

    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB_SIZE,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator([TRAINING_TEXT] * 4, trainer=trainer)
    tok.add_tokens(THINK_TOKENS)
    spec = json.loads(tok.to_str())
    vocab: dict[str, int] = dict(spec["model"]["vocab"])
    for added in spec["added_tokens"]:
        vocab[added["content"]] = added["id"]
    tokens = [""] * len(vocab)
    for text, idx in vocab.items():
        tokens[idx] = text
    types = [3 if t in SPECIAL_TOKENS else 4 if t in THINK_TOKENS else 1 for t in tokens]
    merges = [m if isinstance(m, str) else " ".join(m) for m in spec["model"]["merges"]]
    return tokens, types, merges


def write_tiny_qwen3(path: Path, seed: int = 0) -> Path:
    """Write the tiny random Qwen3 GGUF to ``path`` and return ``path``."""
    import gguf

    tokens, types, merges = _tokenizer()
    vocab = len(tokens)
    rng = np.random.default_rng(seed)

    def matrix(rows: int, cols: int) -> np.ndarray:
        return (rng.standard_normal((rows, cols)) * 0.08).astype(np.float16)

    def norm(size: int) -> np.ndarray:
        return np.ones(size, dtype=np.float32)

    writer = gguf.GGUFWriter(str(path), "qwen3")
    writer.add_name("tiny-random-qwen3")
    writer.add_context_length(CONTEXT)
    writer.add_embedding_length(HIDDEN)
    writer.add_block_count(BLOCKS)
    writer.add_feed_forward_length(FFN)
    writer.add_head_count(HEADS)
    writer.add_head_count_kv(KV_HEADS)
    writer.add_key_length(HEAD_DIM)
    writer.add_value_length(HEAD_DIM)
    writer.add_rope_freq_base(1_000_000.0)
    writer.add_layer_norm_rms_eps(1e-6)
    writer.add_file_type(gguf.LlamaFileType.MOSTLY_F16)
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("qwen2")
    writer.add_token_list(tokens)
    writer.add_token_types(types)
    writer.add_token_merges(merges)
    writer.add_eos_token_id(tokens.index("<|im_end|>"))
    writer.add_pad_token_id(tokens.index("<|endoftext|>"))
    writer.add_bos_token_id(tokens.index("<|endoftext|>"))
    writer.add_add_bos_token(False)
    writer.add_chat_template(QWEN3_CHAT_TEMPLATE)

    writer.add_tensor("token_embd.weight", matrix(vocab, HIDDEN))
    writer.add_tensor("output_norm.weight", norm(HIDDEN))
    writer.add_tensor("output.weight", matrix(vocab, HIDDEN))
    for b in range(BLOCKS):
        p = f"blk.{b}."
        writer.add_tensor(p + "attn_norm.weight", norm(HIDDEN))
        writer.add_tensor(p + "attn_q.weight", matrix(HEADS * HEAD_DIM, HIDDEN))
        writer.add_tensor(p + "attn_k.weight", matrix(KV_HEADS * HEAD_DIM, HIDDEN))
        writer.add_tensor(p + "attn_v.weight", matrix(KV_HEADS * HEAD_DIM, HIDDEN))
        writer.add_tensor(p + "attn_output.weight", matrix(HIDDEN, HEADS * HEAD_DIM))
        writer.add_tensor(p + "attn_q_norm.weight", norm(HEAD_DIM))
        writer.add_tensor(p + "attn_k_norm.weight", norm(HEAD_DIM))
        writer.add_tensor(p + "ffn_norm.weight", norm(HIDDEN))
        writer.add_tensor(p + "ffn_gate.weight", matrix(FFN, HIDDEN))
        writer.add_tensor(p + "ffn_up.weight", matrix(FFN, HIDDEN))
        writer.add_tensor(p + "ffn_down.weight", matrix(HIDDEN, FFN))

    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


if __name__ == "__main__":
    out = write_tiny_qwen3(Path(sys.argv[1] if len(sys.argv) > 1 else "tiny-qwen3.gguf"))
    print(out)
