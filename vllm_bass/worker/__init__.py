"""The vLLM-facing worker side (loaded in the worker processes by dotted path): the workers
(`gpu_worker`, `cpu_worker`), the model runner mixin (`model_runner`), the rejection-sampler
adapter (`sampler`: vLLM's RejectionSampler around `vllm_bass.sampling`), full CUDA graphs for
ragged verification (`cuda_graphs`) and the drafter (`drafter`: BASS's draft loop, the draft
KV catch-up, the captured draft steps). Everything here touches vLLM internals; each touch is
listed in `vllm_bass.patches`."""
