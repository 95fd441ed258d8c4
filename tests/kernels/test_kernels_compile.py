"""Every kernel the engine launches (attention, acceptance, keyed sample, the drafter's
slot and count kernels) compiles for the H100 (sm_90) on a machine without a GPU.

The CPU tests run the kernels through Triton's interpreter, which does not type-check what
the compiler does (constexpr specialisation of int arguments equal to 1, loop-carried types,
constexpr branches): this compiles every PAD/SPLIT variant the engine launches down to PTX,
so such errors show in CI rather than on the GPU host. Runs in a subprocess: the kernel
tests set TRITON_INTERPRET=1 for this process, which turns kernels into interpreted ones.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
INT64_ARGS = {"stride_qt", "stride_bt", "stride_kb", "stride_vb", "stride_ot", "ml_base",
              "ml_plane"}
INT_POINTERS = {"cu_seqlens_q_ptr", "seq_lens_ptr", "block_table_ptr"}


def compile_all() -> list[str]:
    """Compile PAD and SPLIT, both grids, with and without the ==1 specialisation."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    from vllm_bass.kernels.paged_attention_pad import _paged_attention_pad_kernel
    from vllm_bass.kernels.paged_attention_split import _paged_attention_split_kernel

    meta = dict(PAGE_SIZE=16, HEAD_SIZE=128, BLOCK_M=16, BLOCK_N=64, BLOCK_D=128,
                DOT_PRECISION="tf32", DOT_UPCAST=False, HEAD_FASTEST=True)
    done = []
    for kernel in (_paged_attention_pad_kernel, _paged_attention_split_kernel):
        for any_batch in (True, False):
            # q_per_tile == 1 (a GQA group as large as the tile) is specialised to a
            # constexpr; the batch counts are not (`PAD_BATCH_ARGS`)
            for ones in ({"q_per_tile": 1}, {}):
                # the engine's graphs launch with PDL (Hopper), eager steps too: both
                # branches compile with both grids
                pdl = any_batch == bool(ones)
                fixed = {**meta, "ANY_BATCH": any_batch, "PDL": pdl, **ones}
                signature, constexprs = {}, {}
                for i, name in enumerate(kernel.arg_names):
                    if kernel.params[i].is_constexpr or name in fixed:
                        signature[name] = "constexpr"
                        constexprs[(i,)] = fixed[name]
                    elif name.endswith("_ptr"):
                        signature[name] = ("*fp32" if name == "ws_ptr" else
                                           "*i32" if name in INT_POINTERS else "*bf16")
                    elif name == "qk_scale":
                        signature[name] = "fp32"
                    else:
                        signature[name] = "i64" if name in INT64_ARGS else "i32"
                compiled = triton.compile(
                    ASTSource(fn=kernel, signature=signature, constexprs=constexprs),
                    target=GPUTarget("cuda", 90, 32), options=dict(num_warps=4, num_stages=3))
                assert "ptx" in compiled.asm and ".entry" in compiled.asm["ptx"]
                assert ("griddepcontrol.wait" in compiled.asm["ptx"]) == pdl
                done.append(f"{kernel.fn.__name__} any_batch={any_batch} ones={bool(ones)}")
    done += compile_accept_and_emit()
    done += compile_keyed_sample()
    done += compile_pdl_neighbours()
    done += compile_warm_ups()
    return done


TRITON_TYPES = {"torch.int32": "*i32", "torch.int64": "*i64", "torch.bool": "*i1",
                "torch.float32": "*fp32", "torch.bfloat16": "*bf16"}


def compile_warm_ups() -> list[str]:
    """The kernels the engine compiles ahead through `compile_ahead` (the async count
    correction at a small and a 256-row capacity, the draft's first-pass slots), from the
    very arguments their `warm_up` gives Triton (session 41's slot kernel read a Python
    global and never compiled on the GPU: its torch fallback served, silently); and the
    drafter's step update."""
    from vllm_bass.kernels import count_correction, first_pass_slot_mapping
    from vllm_bass.kernels.draft_step_update import _draft_step_update_kernel

    launches = [("count_correction capacity=8", count_correction.warm_up_launch(8)),
                ("count_correction capacity=256", count_correction.warm_up_launch(256)),
                ("first_pass_slot_mapping", first_pass_slot_mapping.warm_up_launch())]
    done = []
    for what, (kernel, args, meta) in launches:
        meta = dict(meta)
        num_warps = meta.pop("num_warps")
        runtime = [n for i, n in enumerate(kernel.arg_names) if not kernel.params[i].is_constexpr]
        assert len(runtime) == len(args), (what, runtime, args)
        pointers = {name: TRITON_TYPES[str(arg)] for name, arg in zip(runtime, args)
                    if not isinstance(arg, int)}
        _compile_sm90(kernel, meta, pointers, num_warps=num_warps)
        done.append(what)
    _compile_sm90(_draft_step_update_kernel,
                  {"BLOCK_SIZE": 16, "MAX_MODEL_LEN": 4096, "N_BLOCKS": 256, "PAD": -1},
                  {"positions_ptr": "*i64", "block_table_ptr": "*i32", "seq_lens_ptr": "*i32",
                   "slot_mapping_ptr": "*i64", "num_reqs_ptr": "*i32"}, num_warps=1)
    return done + ["draft_step_update"]


def compile_pdl_neighbours() -> list[str]:
    """SPLIT's reduction (waits for the splits) and the KV-cache write (lets the attention
    after it start), with and without PDL."""
    from vllm_bass.kernels.paged_attention_split import _split_reduce_kernel
    from vllm_bass.kernels.reshape_and_cache import _reshape_and_cache_kernel

    done = []
    for pdl in (False, True):
        _compile_sm90(_split_reduce_kernel, {"HEAD_SIZE": 128, "BLOCK_D": 128, "SPLITS_PAD": 16,
                                             "PDL": pdl},
                      {"ws_ptr": "*fp32", "out_ptr": "*bf16", "cu_seqlens_q_ptr": "*i32",
                       "ml_base": "i64", "ml_plane": "i64", "stride_ot": "i64"}, num_warps=2,
                      ptx_has="griddepcontrol.wait" if pdl else None)
        _compile_sm90(_reshape_and_cache_kernel, {"PAGE_SIZE": 16, "HEAD_SIZE": 128,
                                                  "BLOCK_H": 8, "BLOCK_D": 128,
                                                  "LAUNCH_DEPENDENTS": pdl},
                      {"key_ptr": "*bf16", "value_ptr": "*bf16", "k_cache_ptr": "*bf16",
                       "v_cache_ptr": "*bf16", "slot_mapping_ptr": "*i64", "stride_kt": "i64",
                       "stride_vt": "i64", "stride_kcb": "i64", "stride_kct": "i64",
                       "stride_vcb": "i64", "stride_vct": "i64"}, num_warps=4,
                      ptx_has="griddepcontrol.launch_dependents" if pdl else None)
        done += [f"split_reduce pdl={pdl}", f"reshape_and_cache pdl={pdl}"]
    return done


def _compile_sm90(kernel, fixed: dict, pointers: dict, num_warps: int,
                  ptx_has: str | None = None) -> None:
    """Compile `kernel` to PTX for sm_90: `fixed` names its constexprs, `pointers` its pointer
    types; every other argument an i32. `ptx_has`: an instruction the PTX must hold."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    signature, constexprs = {}, {}
    for i, name in enumerate(kernel.arg_names):
        if name in fixed:
            signature[name] = "constexpr"
            constexprs[(i,)] = fixed[name]
        else:
            signature[name] = pointers.get(name, "i32")
    compiled = triton.compile(ASTSource(fn=kernel, signature=signature, constexprs=constexprs),
                              target=GPUTarget("cuda", 90, 32), options=dict(num_warps=num_warps))
    assert "ptx" in compiled.asm and ".entry" in compiled.asm["ptx"]
    if ptx_has:
        assert ptx_has in compiled.asm["ptx"], (kernel.fn.__name__, ptx_has)


def compile_keyed_sample() -> list[str]:
    """The seeded rows' keyed sample (uint32 hashing, float64 logs), float32 and bf16 logits,
    whole rows and split vocabularies, and the pick among a row's stretches."""
    from vllm_bass.kernels.keyed_sample import BLOCK_V, _keyed_pick_kernel
    from vllm_bass.kernels.keyed_sample import _keyed_sample_kernel as kernel

    done = []
    for logits in ("*fp32", "*bf16"):
        for split in (False, True):
            _compile_sm90(kernel, {"BLOCK": BLOCK_V, "SPLIT": split},
                          {"logits_ptr": logits, "seeds_ptr": "*i64", "positions_ptr": "*i64",
                           "out_ptr": "*i64", "best_ptr": "*fp64"}, num_warps=8)
            done.append(f"keyed_sample logits={logits} split={split}")
    _compile_sm90(_keyed_pick_kernel, {"BLOCK": 64},
                  {"part_idx_ptr": "*i64", "part_best_ptr": "*fp64", "out_ptr": "*i64"},
                  num_warps=1)
    return done + ["keyed_pick"]


def compile_accept_and_emit() -> list[str]:
    """The three acceptance rules of `accept_and_emit`, with the engine's dtypes."""
    from vllm_bass.kernels.accept_and_emit import _accept_and_emit_kernel as kernel

    pointers = {"draft_ptr": "*i32", "recovered_ptr": "*i64", "accept_ptr": "*i1",
                "uniforms_ptr": "*fp64", "rates_ptr": "*fp64", "starts_ptr": "*i64",
                "counts_ptr": "*i64", "bonus_ptr": "*i32", "out_ptr": "*i32"}
    done = []
    for has_accept, has_rates in ((False, False), (False, True), (True, False)):
        _compile_sm90(kernel, {"HAS_ACCEPT": has_accept, "HAS_RATES": has_rates, "BLOCK": 32},
                      pointers, num_warps=4)
        done.append(f"accept_and_emit accept={has_accept} rates={has_rates}")
    return done


@pytest.mark.cpu
def test_kernels_compile_for_sm90():
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")])
    run = subprocess.run([sys.executable, __file__], cwd=REPO, env=env, capture_output=True,
                         text=True, timeout=600)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert run.stdout.count("compiled") == 24, run.stdout


if __name__ == "__main__":
    for line in compile_all():
        print("compiled", line)
