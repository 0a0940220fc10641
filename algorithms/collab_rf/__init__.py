"""Collaborative random forests (seed 003 §III; docs/collab_rf.md): FIT/SHARE/GET with estimator ids."""
