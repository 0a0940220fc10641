"""DPSDA, DPSDA-C and DPSDA-PS: differentially private distributed online dual averaging for
convex nondecomposable objectives (Cheng, Liao, Li; seed 002; docs/dpsda.md).

Modules:

* :mod:`~algorithms.dpsda.projection` — the ψ-projection Π^ψ_X(z, α) of eq. (7), boxes and balls;
* :mod:`~algorithms.dpsda.weights` — row-stochastic (circulation) and column-stochastic (push-sum) weights;
* :mod:`~algorithms.dpsda.privacy` — Laplace perturbation, sensitivity bound, per-step and horizon ε;
* :mod:`~algorithms.dpsda.losses` — the online losses f_t (least squares for OLR, logistic for OBC);
* :mod:`~algorithms.dpsda.framework` — configuration, blocks, step size and the shared node-level kernels;
* :mod:`~algorithms.dpsda.matrix_form` — the direct (all nodes in one process) implementation, eqs. (11)–(14), (20)–(22);
* :mod:`~algorithms.dpsda.step_function` — the same algorithm as a :class:`algorithms.step.Algorithm`;
* :mod:`~algorithms.dpsda.regret` — regret R(T), running-average regret R̃(T), comparators;
* :mod:`~algorithms.dpsda.experiments` — the synthetic OLR set-up of seed 002 §6, the MNIST OBC stream, centralised baselines.
"""

from algorithms.dpsda.framework import DPSDAConfig
from algorithms.dpsda.matrix_form import DPSDATrace, run_dpsda
from algorithms.dpsda.step_function import DPSDA

__all__ = ["DPSDA", "DPSDAConfig", "DPSDATrace", "run_dpsda"]
