"""Collaborative random forests (seed 003 §III; ALGORITHMS.md §5): FIT/SHARE/GET with estimator ids."""
