"""Bad input fails fast, before any engine process starts, naming the flag and what is
valid: wrong --spec-worker, no draft, mismatched vocabulary or tokenizer, K out of range,
draft context shorter than the target's, a bad environment value the workers would parse."""

import json
import shutil
from pathlib import Path

import pytest

from tests.harness import DRAFT, TARGET
from vllm_bass.config import BassConfigError
from vllm_bass.engine_config import WORKER_CLS

pytestmark = [pytest.mark.cpu, pytest.mark.gpu]


@pytest.fixture(scope="module")
def parser():
    from vllm.engine.arg_utils import AsyncEngineArgs
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    from vllm_bass.plugin import register

    register()
    return AsyncEngineArgs.add_cli_args(FlexibleArgumentParser())


def _engine_args_from_cli(parser, argv):
    from vllm.engine.arg_utils import AsyncEngineArgs

    return AsyncEngineArgs.from_cli_args(parser.parse_args(argv))


def _config_from_cli(parser, argv):
    return _engine_args_from_cli(parser, argv).create_engine_config()


def test_spec_worker_other_value_is_rejected_by_the_parser(parser, capsys):
    with pytest.raises(SystemExit):
        parser.parse_args(["--model", TARGET, "--spec-worker", "eagle"])
    err = capsys.readouterr().err
    assert "--spec-worker" in err and "bass" in err


def test_spec_worker_without_draft(parser):
    with pytest.raises(BassConfigError, match="--speculative-model"):
        _engine_args_from_cli(parser, ["--model", TARGET, "--spec-worker", "bass"])


@pytest.mark.parametrize("argv,flag", [
    (["--spec-worker", "bass"], "--speculative-model"),
    (["--spec-worker", "bass", "--speculative-model", "/nonexistent/draft"],
     "--speculative-model"),
    (["--speculative-model", DRAFT], "--spec-worker")])
def test_cli_error_is_one_line_without_traceback(argv, flag):
    """`vllm-bass serve` with a wrong BASS flag exits with status 2 and one line naming it
    (was a 46-line traceback), before any engine starts."""
    import os
    import subprocess
    import sys

    from tests.harness import engine_env

    proc = subprocess.run([sys.executable, "-m", "vllm_bass.cli", "serve", TARGET, *argv],
                          env=engine_env(), capture_output=True, text=True, timeout=240,
                          cwd=os.path.dirname(os.path.dirname(__file__)))
    out = proc.stdout + proc.stderr
    errors = [line for line in out.splitlines() if "vllm-bass: error:" in line]
    assert proc.returncode == 2, out[-2000:]
    assert len(errors) == 1 and flag in errors[0], out[-2000:]
    assert "Traceback" not in out


@pytest.mark.parametrize("where", ["missing", "empty"])
def test_draft_path_without_a_model_is_named(parser, tmp_path, where):
    """vLLM's own error for this is a 70-line pydantic dump that never says "draft"."""
    path = tmp_path / "draft"
    if where == "empty":
        path.mkdir()
    with pytest.raises(BassConfigError, match="--speculative-model") as err:
        _config_from_cli(parser, ["--model", TARGET, "--spec-worker", "bass",
                                  "--speculative-model", str(path)])
    assert len(str(err.value).splitlines()) == 1


@pytest.mark.parametrize("name, value, message", [
    ("VLLM_BASS_PRECOMPILE_THREADS", "many", "VLLM_BASS_PRECOMPILE_THREADS='many'"),
    ("VLLM_BASS_PAD_STAGES", "two", "VLLM_BASS_PAD_STAGES must be an integer"),
])
def test_bad_environment_value_is_named_before_the_engine_starts(parser, monkeypatch, name,
                                                                  value, message):
    monkeypatch.setenv(name, value)
    with pytest.raises(BassConfigError, match=message):
        _config_from_cli(parser, ["--model", TARGET, "--spec-worker", "bass",
                                  "--speculative-model", DRAFT])


def test_draft_flags_without_spec_worker(parser):
    with pytest.raises(ValueError, match="--spec-worker bass"):
        _engine_args_from_cli(parser, ["--model", TARGET, "--speculative-model", DRAFT])


@pytest.mark.parametrize("k", ["0", "-3", "33", "x"])
def test_num_speculative_tokens_out_of_range_cli(parser, capsys, k):
    with pytest.raises(SystemExit):
        parser.parse_args(["--model", TARGET, "--spec-worker", "bass", "--speculative-model",
                           DRAFT, "--num-speculative-tokens", k])
    err = capsys.readouterr().err
    assert "--num-speculative-tokens" in err and "1..32" in err


@pytest.mark.parametrize("k", [0, 33, -1])
def test_num_speculative_tokens_out_of_range_config(k):
    from vllm.engine.arg_utils import EngineArgs

    args = EngineArgs(model=TARGET, speculative_config={"method": "bass", "model": DRAFT,
                                                         "num_speculative_tokens": k})
    with pytest.raises(BassConfigError, match="num.speculative.tokens.*1..32"):
        args.create_engine_config()


@pytest.mark.parametrize("name", ["auto_off", "full_graph_verification", "check_tokenizer",
                                  "explore_draft_lengths"])
def test_boolean_option_rejects_a_string(name):
    from vllm.engine.arg_utils import EngineArgs

    args = EngineArgs(model=TARGET, speculative_config={"method": "bass", "model": DRAFT,
                                                         name: "no"})
    with pytest.raises(BassConfigError, match=f"'{name}'.*true or false.*'no'"):
        args.create_engine_config()


@pytest.mark.parametrize("name,value,valid", [
    ("verify_knee_tokens", -1, "non-negative integer"),
    ("verify_knee_tokens", 1.5, "non-negative integer"),
    ("uniform_plan_margin", 2.0, r"number in \[0, 1\]"),
    ("uniform_plan_margin", "high", r"number in \[0, 1\]")])
def test_numeric_option_out_of_range_is_named(name, value, valid):
    from vllm_bass.config import BassConfig

    with pytest.raises(BassConfigError, match=f"'{name}'.*{valid}"):
        BassConfig(draft_model="d", **{name: value})


def test_unknown_bass_option_is_named():
    from vllm.engine.arg_utils import EngineArgs

    args = EngineArgs(model=TARGET, speculative_config={"method": "bass", "model": DRAFT,
                                                         "draft_lenght_policy": "bass"})
    with pytest.raises(BassConfigError, match="draft_lenght_policy"):
        args.create_engine_config()


def _draft_copy(tmp_path: Path, name: str, edit_config=None, edit_tokenizer=None) -> str:
    dst = tmp_path / name
    shutil.copytree(DRAFT, dst)
    if edit_config:
        cfg = json.loads((dst / "config.json").read_text())
        edit_config(cfg)
        (dst / "config.json").write_text(json.dumps(cfg))
    if edit_tokenizer:
        tok = json.loads((dst / "tokenizer.json").read_text())
        edit_tokenizer(tok)
        (dst / "tokenizer.json").write_text(json.dumps(tok))
    return str(dst)


def test_draft_vocab_size_differs(parser, tmp_path):
    bad = _draft_copy(tmp_path, "bigvocab", edit_config=lambda c: c.update(vocab_size=c["vocab_size"] + 64))
    with pytest.raises(BassConfigError, match="vocabulary size"):
        _config_from_cli(parser, ["--model", TARGET, "--spec-worker", "bass",
                                  "--speculative-model", bad])


def _swap_two_tokens(tok):
    vocab = tok["model"]["vocab"]
    a, b = sorted(vocab, key=vocab.get)[300:302]
    vocab[a], vocab[b] = vocab[b], vocab[a]


def test_draft_tokenizer_differs(parser, tmp_path):
    bad = _draft_copy(tmp_path, "othertok", edit_tokenizer=_swap_two_tokens)
    with pytest.raises(BassConfigError, match="different tokenizer"):
        _config_from_cli(parser, ["--model", TARGET, "--spec-worker", "bass",
                                  "--speculative-model", bad])


def test_draft_context_shorter_than_target(parser, tmp_path):
    short = _draft_copy(tmp_path, "short", edit_config=lambda c: c.update(max_position_embeddings=256))
    with pytest.raises(BassConfigError, match="--max-model-len 256"):
        _config_from_cli(parser, ["--model", TARGET, "--spec-worker", "bass",
                                  "--speculative-model", short, "--max-model-len", "1024"])
    # the suggested fix works
    cfg = _config_from_cli(parser, ["--model", TARGET, "--spec-worker", "bass",
                                    "--speculative-model", short, "--max-model-len", "256"])
    assert cfg.speculative_config.method == "draft_model"


def test_good_cli_builds_bass_config(parser):
    cfg = _config_from_cli(parser, ["--model", TARGET, "--spec-worker", "bass",
                                    "--speculative-model", DRAFT, "--num-speculative-tokens", "5",
                                    "--draft-length-policy", "fixed"])
    assert cfg.parallel_config.worker_cls in WORKER_CLS.values()
    assert cfg.scheduler_config.scheduler_cls == "vllm_bass.scheduler.BassScheduler"
    assert cfg.speculative_config.num_speculative_tokens == 5
    assert cfg.additional_config["bass"]["draft_length_policy"] == "fixed"


def test_speculative_config_json_method_bass(parser):
    spec = json.dumps({"method": "bass", "model": DRAFT, "num_speculative_tokens": 3})
    cfg = _config_from_cli(parser, ["--model", TARGET, "--speculative-config", spec])
    assert cfg.additional_config["bass"]["num_speculative_tokens"] == 3
    assert cfg.parallel_config.worker_cls in WORKER_CLS.values()


def test_llm_constructor_fails_before_engine_start(tmp_path):
    """Through the offline surface: LLM(...) raises our error, no engine process is made."""
    from vllm import LLM

    bad = _draft_copy(tmp_path, "bigvocab2", edit_config=lambda c: c.update(vocab_size=c["vocab_size"] * 2))
    with pytest.raises(BassConfigError, match="vocabulary size"):
        LLM(model=TARGET, speculative_config={"method": "bass", "model": bad})
