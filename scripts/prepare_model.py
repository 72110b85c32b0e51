"""Make the default answer model ready once, as ``make install`` does: converted to OpenVINO IR and
its compiled model cached under ``data/models``, so that the first ``answer`` loads in about a
second instead of converting and compiling for ~10 s (benches/RESULTS.md "Answer latency").

Nothing is exported and the network is never used: when Qwen3-0.6B is not exported here the
packaged SmolLM2 is prepared, the model ``answer`` then falls back to. A model already prepared is
only checked (its cache stamp), which costs the import of OpenVINO GenAI. Best effort: a model that
cannot be prepared is one line on stderr and exit status 0, so that installing never fails for the
sake of a speed-up (``answer`` then reports the problem itself).
"""

from __future__ import annotations

import sys

from fastrag.answering.compiled import cache_matches
from fastrag.answering.generator import load_generator
from fastrag.answering.model_files import choose_model
from fastrag.errors import UserError

DEVICE = "CPU"


def main() -> int:
    """Prepare the model ``answer`` uses by default; print one line when work was done."""
    try:
        spec = choose_model(allow_export=False).spec
        if spec.kind == "ir" and spec.compiled_cache is not None:
            import openvino_genai

            if cache_matches(spec.compiled_cache, spec.path, str(openvino_genai.__version__), DEVICE):
                return 0
        info = load_generator(spec, DEVICE).info
    except (UserError, ImportError, RuntimeError, OSError) as exc:
        print(f"prepare_model: the answer model was not prepared: {exc}", file=sys.stderr)
        return 0
    print(f"answer model ready: {info.name} in {info.seconds:.1f} s (compiled cache: {info.compiled})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
