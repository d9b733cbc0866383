"""Peer systems `minikraft bench --compare` runs beside minikraft, started and stopped by pid."""
