"""Independent Python reference of the MiniMax-M3 / M3.1 text model with MiniMax Sparse Attention (MSA).

Written from the specs in ../shared/spec (model.md, msa.md, formats.md, dspark.md) only. It runs on Debian's
torch 1.13 (CPU) and on PyTorch 2.x (CPU or CUDA). See tools/reference/README.md.
"""
