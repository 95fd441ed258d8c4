"""Triton kernels of vllm-bass, one op per module (kernel, launcher, torch reference).

Nothing is imported here so that importing the package never needs Triton.
"""
