"""Config-only model folders for benchmarks on dummy weights (load_format='dummy'): the
embedded pair's Llama config with other layer shapes, and its tokenizer."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
TOKENIZER_FROM = REPO / "models/bass-tiny-target"


def dummy_model_folder(folder: Path, shape: dict, max_positions: int) -> str:
    base = json.loads((TOKENIZER_FROM / "config.json").read_text())
    folder.mkdir(parents=True, exist_ok=True)
    cfg = dict(base, **shape, tie_word_embeddings=False, max_position_embeddings=max_positions)
    (folder / "config.json").write_text(json.dumps(cfg, indent=1))
    for f in TOKENIZER_FROM.iterdir():
        if f.name.startswith(("tokenizer", "special_tokens", "generation_config")):
            shutil.copy(f, folder / f.name)
    return str(folder)
