"""Runplane: a managed OpenTofu run control plane."""
