"""gadfly's CUDA/Triton evaluator.

Modules that need only the standard library (importable without torch or a GPU):
``results``, ``stats``, ``roofline``, ``tolerance``, ``spec``, ``procs``, ``protocol``, ``buildlib``.
Modules that need a GPU: ``cudadrv`` (ctypes on libcuda, no torch), ``runner`` (the
candidate's process), ``grader`` (the evaluator, needs torch).
"""
__version__ = "0.1.0"
